#!/usr/bin/env bash
# Session 56, call 2 (call 1 was ../gpu-2026-12-07-s55/call4.sh: the GLU A/B and run.sh, which its
# 480 s cut stopped inside test_cuda_fused's timings). Binaries of the final s55 head, but
# test_cuda_fused rebuilt with random weight blocks instead of quantised random floats (see
# build-gpucarry/COMMIT). Most important first: run.sh's model part (whole-model logits with the
# GLU GEMV on by default), test_cuda_fused whole with its timings (how long now), the GLU A/B on
# Llama-3-8B (its dealing rule refuses the kernel; =2 forces it), then run.sh's other kernel tests
# in what time is left.
set -u
O=/tmp/o56b B=build-gpucarry
. bench/gpu_call_env.sh
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 OUT=$O/model timeout 230 tests/cuda/run.sh > $O/model.txt 2>&1
step "run.sh model part rc=$?: $(grep -c PASS $O/model.txt) PASS, $(grep -c FAIL $O/model.txt) FAIL, $(tail -1 $O/model.txt)"
t0=$(date +%s)
timeout 150 $B/test_cuda_fused > $O/fused.txt 2>&1
step "test_cuda_fused rc=$? in $(($(date +%s) - t0)) s: $(grep -c '^PASS' $O/fused.txt) PASS, $(grep -c '^FAIL' $O/fused.txt) FAIL, $(tail -1 $O/fused.txt)"
ab llama3-8b "q4_0 q4_k" SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=2 2
rm -f /dev/shm/*.gguf
left=$((560 - ($(date +%s) - STEP_T0)))
SI_BIN_DIR=$B SI_KTESTS="test_cuda_gemm test_cuda_sample test_cuda_kernels" OUT=$O/run \
    timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh kernel tests (gemm, sample, kernels, then the knob runs) rc=$?: $(tail -3 $O/runsh.txt | tr '\n' ' ')"
step done
