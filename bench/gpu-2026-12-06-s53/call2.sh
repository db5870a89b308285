#!/usr/bin/env bash
# Session 53, call 2: row groups dealt warp-major in the batch-1 quantised GEMV (gemv_q8x.cuh,
# Q8X_DEAL_WARP_MAJOR: the last, partial round of groups spread over every CTA instead of filling
# the first CTAs whole; gate/up at Llama-2-7B: 28 of 132 SMs streamed 6 groups a warp, the rest
# 5). Same binary, knob SI_CUDA_GEMV_Q8X_DEAL=0 the order before. First the GEMV chain
# (persist_chain: the engine's chain and each layer shape alone), then tg128 of Llama-2-7B Q4_0,
# Q4_K, Q8_0, two rounds in opposite orders; then the GEMV checks (the same bits either way).
set -u
O=/tmp/o2 B=build-gpucarry
. bench/gpu_call_env.sh
for d in 0 1; do
    SI_CUDA_GEMV_Q8X_DEAL=$d timeout 60 $B/persist_chain q4_0 10 > $O/chain-q4_0-deal$d.txt 2>&1
    step "chain q4_0 deal=$d rc=$?: $(grep -E '^ *gemv' $O/chain-q4_0-deal$d.txt | head -4 | tr -s ' ' | tr '\n' ';')"
done
for t in q4_0 q4_k q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
done
step synth
for r in 1 2; do
    for t in q4_0 q4_k q8_0; do
        order="0 1"; [ $r = 2 ] && order="1 0"
        for d in $order; do
            SI_CUDA_GEMV_Q8X_DEAL=$d timeout 60 $B/swiftinfer bench --device cuda -m /dev/shm/llama2-7b-$t.gguf -p 0 -n 128 -r 3 > $O/tg-$t-deal$d-r$r.txt 2>&1
            step "round $r $t deal=$d: $(grep -E 'tg128' $O/tg-$t-deal$d-r$r.txt | tr -s ' ' | tr '\n' ' ')"
        done
    done
done
grep -h "GPU copy" $O/tg-q4_0-deal1-r1.txt | head -1 > $O/copybw.txt
timeout 120 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q8_0,q6_k,q4_1,q5_k > $O/kernels.txt 2>&1
step "test_cuda_kernels --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(tail -1 $O/kernels.txt)"
step done
