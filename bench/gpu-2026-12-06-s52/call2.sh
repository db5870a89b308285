#!/usr/bin/env bash
# Session 52, call 2 (cut to ~4 minutes: most of the session's device time went to failed starts):
# 9-10-row GEMVs at K = 14336 (Llama-3-8B's down projection) with x whole in shared memory beside
# scales kept for 10 x rows, not 16 (gemv_q8x_tc.cuh TC_XS_COMPACT), one launch instead of two.
# On an H200 first (the issue's card, not lent since s46): tg128 of Llama-2-7B Q4_0 against the
# GPU's measured copy bandwidth. Then test_cuda_kernels' GEMV checks of six types (9-16 rows bit
# for bit their 1-row runs; 300 x 14336 takes the compact kernel at 9-10 rows by default);
# memcheck over --small --gemv with the compact scales on every 9-10-row launch
# (SI_CUDA_GEMV_TC_COMPACT=1); the engine, Llama-3-8B Q4_0 at 9 and 10 requests of 512 + 128
# tokens, the default against SI_CUDA_GEMV_TC_COMPACT=0 (two launches at 9-10, as before).
set -u
O=/tmp/o2 B=build-gpucarry
. bench/gpu_call_env.sh
if grep -q H200 $O/gpu.txt; then
    m=/dev/shm/llama2-7b-q4_0.gguf
    timeout 60 $B/swiftinfer synth -o $m --shape llama2-7b --type q4_0 > /dev/null 2>&1
    timeout 60 $B/swiftinfer bench --device cuda -m $m -p 0 -n 128 -r 3 > $O/tg-h200.txt 2>&1
    step "H200 tg128 rc=$?: $(grep -E 'GPU copy|tg128' $O/tg-h200.txt | tr '\n' ' ')"
    rm -f $m
fi
timeout 90 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q6_k,q2_k,q5_0,iq4_xs > $O/kernels.txt 2>&1
step "test_cuda_kernels --no-bench --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(grep -c 'same bits nb 1..16' $O/kernels.txt) 1..16 lines, $(tail -1 $O/kernels.txt)"
SI_CUDA_GEMV_TC_COMPACT=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv --no-bench --types q4_0,q6_k > $O/memcheck.txt 2>&1
step "memcheck (compact) --small --gemv rc=$?: $(grep -c '^FAIL' $O/memcheck.txt) FAIL, $(tail -1 $O/memcheck.txt)"
m=/dev/shm/llama3-8b-q4_0.gguf
timeout 60 $B/swiftinfer synth -o $m --shape llama3-8b --type q4_0 > /dev/null 2>&1 || step "synth failed"
for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_COMPACT=0"; do
    f=$O/c-$(echo $cfg | tr ' =' '_-').json
    env $cfg timeout 45 $B/swiftinfer bench --device cuda -m $m -c 9,10 -p 512 -n 128 --json > $f 2> ${f%.json}.err
    step "llama3-8b q4_0 [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
done
step done
