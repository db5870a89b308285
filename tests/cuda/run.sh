#!/usr/bin/env bash
# tests/cuda/run.sh — the CUDA kernel tests on the GPU machine, in one call:
#   1. configure + build (Release, SWIFTINFER_CUDA=ON) in build-cuda (falls back to plain nvcc
#      when the host libraries the full project needs, e.g. PCRE2, are missing there);
#   2. test_cuda_kernels: every kernel vs the CPU reference, then timings;
#   3. test_cuda_kernels --small under compute-sanitizer memcheck and racecheck.
# Logs go to ${OUT:-/tmp}/. Exit status non-zero on any failure.
set -u -o pipefail
cd "$(dirname "$0")/../.."
LOG=${OUT:-/tmp}
mkdir -p "$LOG" build-cuda
fail=0
nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1 || true
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)  date: $(date -u +%F)" | tee "$LOG/build.log"

BIN=build-cuda/test_cuda_kernels
if ! { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DSWIFTINFER_CUDA=ON \
         -DSWIFTINFER_TESTS=OFF && cmake --build build-cuda -j "$(nproc)" --target test_cuda_kernels; } \
       >> "$LOG/build.log" 2>&1; then
    echo "cmake build failed (see build.log); falling back to nvcc" | tee -a "$LOG/build.log"
    nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Iinclude -Isrc -o "$BIN" \
        tests/cuda/test_cuda_kernels.cu src/backend/cuda/*.cu src/quant/quant.c \
        src/quant/quant_float.c src/quant/quant_legacy.c src/quant/quant_k.c -lcublasLt -lm \
        >> "$LOG/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$LOG/build.log"; exit 1; }
fi

echo "== test_cuda_kernels"
"$BIN" > "$LOG/test_cuda_kernels.log" 2>&1 || { fail=1; echo "test_cuda_kernels FAILED"; }
echo "== memcheck (--small)"
compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN" --small > "$LOG/memcheck.log" 2>&1 \
    || { fail=1; echo "memcheck FAILED"; }
tail -3 "$LOG/memcheck.log"
echo "== racecheck (--small)"
compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN" --small > "$LOG/racecheck.log" 2>&1 \
    || { fail=1; echo "racecheck FAILED"; }
tail -3 "$LOG/racecheck.log"

# the short table last (the GPU tool returns the end of the output)
grep -E "^FAIL" "$LOG/test_cuda_kernels.log" | head -40
sed -n '/==== timings/,$p' "$LOG/test_cuda_kernels.log"
grep -E "^==== summary" "$LOG/test_cuda_kernels.log"
[ "$fail" = 0 ] && echo "RUN.SH: ALL PASSED" || echo "RUN.SH: FAILURES"
exit "$fail"
