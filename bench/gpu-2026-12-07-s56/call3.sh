#!/usr/bin/env bash
# Session 56, call 3 (refused: the session's device time was spent; the next session's first call):
# binaries of the GLU rule at 8/7 the plain GEMV's rounds (swiftinfer, libswiftinfer.so,
# test_cuda_fused, test_cuda_model rebuilt; see build-gpucarry/COMMIT). tg128 Llama-3-8B Q4_0 by
# default (the rule now takes the GLU GEMV there) against SI_CUDA_GEMV_GLU=0; test_cuda_fused with
# SI_CUDA_GEMV_Q8X_NORM_WIDE=0 (call 2 found the test expecting a GLU launch the 8-warp CTAs do not
# have) and by default; then tests/cuda/run.sh whole in what is left of the call (call 1's and 2's
# parts of it ran session 55's binaries; this also says, section by section, how long the whole
# takes).
set -u
O=/tmp/o56c B=build-gpucarry
. bench/gpu_call_env.sh
ab llama3-8b q4_0 SI_NONE=0 SI_CUDA_GEMV_GLU=0 1
rm -f /dev/shm/*.gguf
for e in SI_CUDA_GEMV_Q8X_NORM_WIDE=0 SI_NONE=0; do
    env $e timeout 60 $B/test_cuda_fused --no-bench > $O/fused-$e.txt 2>&1
    step "test_cuda_fused $e rc=$?: $(grep -c '^PASS' $O/fused-$e.txt) PASS, $(grep -c '^FAIL' $O/fused-$e.txt) FAIL, $(grep -c 'refused in 8-warp' $O/fused-$e.txt) refused-narrow lines, $(tail -1 $O/fused-$e.txt)"
done
# run.sh whole (each section's start in seconds: does it fit one call now?); cut before the limit
left=$((560 - ($(date +%s) - STEP_T0)))
SI_BIN_DIR=$B OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep -c FAIL $O/runsh.txt) FAIL lines, $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
