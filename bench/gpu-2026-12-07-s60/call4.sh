#!/usr/bin/env bash
# Session 60, call 4: after call 3's two failures. test_cuda_fused --no-bench with the GLU refusal
# check moved after SI_CUDA_GEMV_GLU=2 is set (call 3's early check had fixed the knob at its
# default); test_cuda_model on SmolLM2-135M-shaped Q4_1 (call 3: "sampling on the gpu (seeded)"
# on the FP8 KV cache, t 1.0 alone, 3/4 requests with the device's and the host's ids alike) three
# times with the defaults and twice each with SI_CUDA_GEMV_NORM=0 and SI_CUDA_GEMV_DIRECT=0: does
# it fail every time, and only with the norm inside the direct GEMV?
set -u
O=${O:-/tmp/o60d} B=build-gpucarry
. bench/gpu_call_env.sh
timeout 100 stdbuf -oL $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused --no-bench rc=$?: $(grep -c '^PASS' $O/fused.txt) PASS, $(grep -c '^FAIL' $O/fused.txt) FAIL, $(tail -1 $O/fused.txt)"
timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-q4_1.gguf --shape smollm2-135m --type q4_1 > /dev/null 2>&1
for e in SI_NONE=0 SI_CUDA_GEMV_NORM=0 SI_CUDA_GEMV_DIRECT=0 SI_NONE=0 SI_CUDA_GEMV_NORM=0 SI_CUDA_GEMV_DIRECT=0 SI_NONE=0; do
    n=$((${n:-0} + 1))
    env $e timeout 60 $B/test_cuda_model /dev/shm/smollm2-q4_1.gguf 5e-2 > $O/model-$n-$e.txt 2>&1
    step "test_cuda_model smollm2 q4_1 $e rc=$?: $(grep -c '^PASS' $O/model-$n-$e.txt) PASS, $(grep -c '^FAIL' $O/model-$n-$e.txt) FAIL: $(grep '^FAIL' $O/model-$n-$e.txt | cut -c1-90 | tr '\n' ' ')"
done
step done
