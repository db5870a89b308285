#!/usr/bin/env bash
# Session 53, call 3: the checks session 52 left unrun, on this session's binaries: test_cuda_fused
# by default and with the 10-row scales at every 9-10-row launch (SI_CUDA_GEMV_TC_COMPACT=1: that
# kernel with x quantised ahead by the norm / SwiGLU, the engine's path), then run.sh's model part.
set -u
O=/tmp/o3 B=build-gpucarry
. bench/gpu_call_env.sh
SI_CUDA_GEMV_TC_COMPACT=1 timeout 150 $B/test_cuda_fused --no-bench > $O/fused-compact.txt 2>&1
step "test_cuda_fused (compact) rc=$?: $(grep -c '^FAIL' $O/fused-compact.txt) FAIL lines, $(tail -1 $O/fused-compact.txt)"
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 OUT=$O/run timeout 240 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh model part rc=$?: $(grep -c PASS $O/runsh.txt) PASS, $(grep -c FAIL $O/runsh.txt) FAIL, $(tail -1 $O/runsh.txt)"
timeout 150 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused (default) rc=$?: $(grep -c '^FAIL' $O/fused.txt) FAIL lines, $(tail -1 $O/fused.txt)"
step done
