#!/usr/bin/env bash
# fuzz.sh [seconds] — builds every parser fuzz target (tests/fuzz/fuzz_NAME.c) with clang +
# libFuzzer (build dir build-fuzz) and runs each for the given seconds (default 60) on a
# temporary copy of its seed corpus tests/fuzz/corpus/NAME, so the committed seeds are not
# modified. Exits non-zero on a finding; crashing inputs are kept in build-fuzz/findings/NAME/.
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"
targets=(gguf jinja openai_request)

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
        "$build/fuzz_$name" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 \
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
        echo "fuzz.sh: fuzz_$name: no findings in ${secs}s"
    fi
done
exit "$failed"
