#!/usr/bin/env bash
# Session 53, call 3: the final head's binaries (CTA-major row groups as before; the output
# matrix's GEMV with the last residual add and the output norm inside, knob
# SI_CUDA_GEMV_OUT_NORM=0 the three kernels): tg128 of Llama-2-7B Q4_0 with and without the knob,
# alternating, and of Q8_0; the GEMV checks of the batch-1 kernels (code back to e66eac3's).
set -u
O=/tmp/o3 B=build-gpucarry
. bench/gpu_call_env.sh
for t in q4_0 q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
done
tg128 q4_0 SI_NONE=0 r1; tg128 q4_0 SI_CUDA_GEMV_OUT_NORM=0 r1; tg128 q4_0 SI_CUDA_GEMV_OUT_NORM=0 r2; tg128 q4_0 SI_NONE=0 r2
tg128 q8_0 SI_NONE=0 r1
timeout 100 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q8_0,q6_k > $O/kernels.txt 2>&1
step "test_cuda_kernels --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(tail -1 $O/kernels.txt)"
step done
