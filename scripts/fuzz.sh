#!/usr/bin/env bash
# fuzz.sh [seconds] — builds every parser fuzz target (tests/fuzz/fuzz_NAME.c) with clang +
# libFuzzer (build dir build-fuzz) and runs each on a temporary copy of its seed corpus
# tests/fuzz/corpus/NAME, so the committed seeds are not modified. Exits non-zero on a finding;
# crashing inputs are kept in build-fuzz/findings/NAME/.
#
# NOTE: each run is a fixed number of inputs from a fixed seed (FUZZ_SEED, default 1), so a
# run is reproducible: CI explores exactly the inputs a developer's run explored, and a finding
# never depends on how fast the machine happened to be. [seconds] (default 120) only caps the
# time. Longer exploratory runs: FUZZ_SCALE=10 scripts/fuzz.sh 1200, or another FUZZ_SEED.
set -euo pipefail

secs="${1:-120}"
seed="${FUZZ_SEED:-1}"
scale="${FUZZ_SCALE:-1}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
targets=(gguf jinja openai_request gemm_table)
declare -A runs=([gguf]=2000000 [jinja]=400000 [openai_request]=1500000 [gemm_table]=300000) # ~40-60 s each here (gemm_table ~10 s)

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DSWIFTINFER_FUZZ=ON \
    -DSWIFTINFER_TESTS=OFF -DSWIFTINFER_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}"

work="$(mktemp -d "${TMPDIR:-/tmp}/si-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failed=0
for name in "${targets[@]}"; do
    cp -r "$root/tests/fuzz/corpus/$name" "$work/corpus-$name"
    mkdir -p "$work/artifacts-$name"
    rc=0
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
        "$build/fuzz_$name" -seed="$seed" -runs=$((runs[$name] * scale)) \
        -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 \
        -timeout=10 -artifact_prefix="$work/artifacts-$name/" "$work/corpus-$name" \
        2> "$work/log-$name" || rc=$?
    tail -n 1 "$work/log-$name"
    if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/artifacts-$name")" ]; then
        mkdir -p "$build/findings/$name"
        cp -r "$work/artifacts-$name/." "$build/findings/$name/" 2>/dev/null || true
        tail -n 40 "$work/log-$name" >&2
        echo "fuzz.sh: fuzz_$name found a problem (exit $rc); inputs in $build/findings/$name/" >&2
        failed=1
    else
        echo "fuzz.sh: fuzz_$name: no findings in $((runs[$name] * scale)) runs (seed $seed)"
    fi
done
exit "$failed"
