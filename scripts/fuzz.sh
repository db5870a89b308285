#!/usr/bin/env bash
# fuzz.sh [seconds] — builds the GGUF fuzz target with clang + libFuzzer (build dir build-fuzz,
# -DSWIFTINFER_FUZZ=ON -DSWIFTINFER_TESTS=OFF) and runs it for the given seconds (default 60)
# on a temporary copy of tests/fuzz/corpus/gguf, so the committed seed corpus is not modified.
# Exits non-zero on a finding; the crashing inputs are kept in build-fuzz/findings/.
set -euo pipefail

secs="${1:-60}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-fuzz"

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DSWIFTINFER_FUZZ=ON \
    -DSWIFTINFER_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_gguf -j"$(nproc)"

work="$(mktemp -d "${TMPDIR:-/tmp}/si-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/fuzz/corpus/gguf" "$work/corpus"
mkdir -p "$work/artifacts"

rc=0
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    "$build/fuzz_gguf" -max_total_time="$secs" -max_len=16384 -rss_limit_mb=2048 \
    -timeout=10 -artifact_prefix="$work/artifacts/" "$work/corpus" || rc=$?

if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$work/artifacts")" ]; then
    mkdir -p "$build/findings"
    cp -r "$work/artifacts/." "$build/findings/" 2>/dev/null || true
    echo "fuzz.sh: fuzz_gguf found a problem (exit $rc); inputs in $build/findings/" >&2
    exit 1
fi
echo "fuzz.sh: no findings in ${secs}s"
