#!/usr/bin/env bash
# Session 53, call 2: row groups dealt warp-major in the batch-1 quantised GEMV (gemv_q8x.cuh,
# Q8X_DEAL_WARP_MAJOR: the last, partial round of groups spread over every CTA instead of filling
# the first CTAs whole; gate/up at Llama-2-7B: 28 of 132 SMs streamed 6 groups a warp, the rest
# 5). Same binary, knob SI_CUDA_GEMV_Q8X_DEAL=0 the order before. And (Q4_0) the output matrix's
# GEMV with the last residual add and the output norm inside (SI_CUDA_GEMV_OUT_NORM=0: the three
# kernels as before). First the GEMV chain
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
# settings: the order before (DEAL=0), the default (both changes), the three output kernels
for r in 1 2; do
    for t in q4_0 q4_k q8_0; do
        sets="SI_CUDA_GEMV_Q8X_DEAL=0 SI_NONE=0"
        [ $t = q4_0 ] && sets="$sets SI_CUDA_GEMV_OUT_NORM=0"
        [ $r = 2 ] && sets=$(echo $sets | tr ' ' '\n' | tac | tr '\n' ' ')
        for e in $sets; do
            f=$O/tg-$t-$e-r$r.txt
            env $e timeout 60 $B/swiftinfer bench --device cuda -m /dev/shm/llama2-7b-$t.gguf -p 0 -n 128 -r 3 > $f 2>&1
            step "round $r $t $e: $(grep -E 'tg128' $f | tr -s ' ' | tr '\n' ' ')"
        done
    done
done
grep -h "GPU copy" $O/tg-q4_0-SI_NONE=0-r1.txt | head -1 > $O/copybw.txt
timeout 120 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q8_0,q6_k,q4_1,q5_k > $O/kernels.txt 2>&1
step "test_cuda_kernels --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(tail -1 $O/kernels.txt)"
step done
