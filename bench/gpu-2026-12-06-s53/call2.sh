#!/usr/bin/env bash
# Session 53, call 2 (one call may be all this session gets: most important first).
# A/B, same binary: row groups dealt warp-major in the batch-1 quantised GEMV (gemv_q8x.cuh,
# Q8X_DEAL_WARP_MAJOR: the last, partial round of groups spread over every CTA instead of filling
# the first CTAs whole; gate/up at Llama-2-7B: 28 of 132 SMs streamed 6 groups a warp, the rest
# 5; knob SI_CUDA_GEMV_Q8X_DEAL=0 the order before), and the output matrix's GEMV with the last
# residual add and the output norm inside (knob SI_CUDA_GEMV_OUT_NORM=0: the three kernels as
# before). tg128 of Llama-2-7B Q4_0 (two rounds in opposite orders), the GEMV checks, then the
# check session 52 left unrun (test_cuda_fused with SI_CUDA_GEMV_TC_COMPACT=1), Q4_K / Q8_0 A/B,
# the GEMV chain (persist_chain) both ways, run.sh's model part. (tg128: bench/gpu_call_env.sh;
# the call ran the same command as a function of its own.)
set -u
O=/tmp/o2 B=build-gpucarry
. bench/gpu_call_env.sh
timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-q4_0.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
for e in SI_CUDA_GEMV_Q8X_DEAL=0 SI_NONE=0 SI_CUDA_GEMV_OUT_NORM=0; do tg128 q4_0 $e r1; done
for e in SI_CUDA_GEMV_OUT_NORM=0 SI_NONE=0 SI_CUDA_GEMV_Q8X_DEAL=0; do tg128 q4_0 $e r2; done
timeout 100 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q8_0,q6_k > $O/kernels.txt 2>&1
step "test_cuda_kernels --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(tail -1 $O/kernels.txt)"
SI_CUDA_GEMV_TC_COMPACT=1 timeout 120 $B/test_cuda_fused --no-bench > $O/fused-compact.txt 2>&1
step "test_cuda_fused (compact) rc=$?: $(grep -c '^FAIL' $O/fused-compact.txt) FAIL lines, $(tail -1 $O/fused-compact.txt)"
for t in q4_k q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
    for e in SI_CUDA_GEMV_Q8X_DEAL=0 SI_NONE=0; do tg128 $t $e r1; done
    for e in SI_NONE=0 SI_CUDA_GEMV_Q8X_DEAL=0; do tg128 $t $e r2; done
    rm -f /dev/shm/llama2-7b-$t.gguf
done
for d in 0 1; do
    SI_CUDA_GEMV_Q8X_DEAL=$d timeout 40 $B/persist_chain q4_0 10 > $O/chain-q4_0-deal$d.txt 2>&1
    step "chain q4_0 deal=$d rc=$?"
done
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 OUT=$O/run timeout 200 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh model part rc=$?: $(grep -c PASS $O/runsh.txt) PASS, $(grep -c FAIL $O/runsh.txt) FAIL, $(tail -1 $O/runsh.txt)"
step done
