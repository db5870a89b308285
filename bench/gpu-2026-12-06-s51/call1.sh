#!/usr/bin/env bash
# Session 51, call 1: 9-16-row decode matmuls whose x does not fit in shared memory whole
# (Llama-2-7B's down projection, K = 11008, past 12 rows; Llama-3-8B's, K = 14336, at 9-16) take
# x in parts in one launch (gemv_q8x_tc.cuh MT = 2) instead of two launches. In the order that
# matters if the call is cut off: test_cuda_kernels' GEMV checks of every quantised type (9-16
# rows bit for bit their 1-row runs), by default and with x in parts on every launch
# (SI_CUDA_GEMV_TC_PARTS=2); test_cuda_fused both ways; memcheck and racecheck over the small
# GEMV shapes (20 x 8192: 2-4 parts, 2 tiles a CTA) with parts forced; then the engine, all-decoding
# t/s of requests of 512 + 128 tokens: Llama-3-8B Q4_0 / Q4_K_M at 8, 9, 12, 16 and Llama-2-7B
# Q4_0 at 12, 13, 16, the default (parts) against SI_CUDA_GEMV_TC_PARTS=1 (s50's two launches),
# two rounds alternating. Also the new `bench --memory --device cuda` (the GPU's copy bandwidth)
# and tg128 of the Q4_0 models against it.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o1; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o1.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
TYPES=q4_0,q4_1,q5_0,q5_1,iq4_nl,iq4_xs,q4_k,q5_k,q6_k,q3_k,q2_k,q8_0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $O/gpu.txt 2>&1
for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=2"; do
    k=$(echo $cfg | tr ' =' '_-')
    env $cfg timeout 240 $B/test_cuda_kernels --no-bench --gemv --types $TYPES > $O/kernels-$k.txt 2>&1
    step "[$cfg] test_cuda_kernels --no-bench --gemv rc=$?: $(grep -c '^FAIL' $O/kernels-$k.txt) FAIL lines, $(grep -c 'same bits nb 1..16' $O/kernels-$k.txt) 1..16 lines, $(tail -1 $O/kernels-$k.txt)"
    env $cfg timeout 120 $B/test_cuda_fused --no-bench > $O/fused-$k.txt 2>&1
    step "[$cfg] test_cuda_fused --no-bench rc=$?: $(grep -c '^FAIL' $O/fused-$k.txt) FAIL, $(grep -c '^PASS gemv_pre.*nb=1[0-9]' $O/fused-$k.txt) PASS gemv_pre nb 10-16, $(tail -1 $O/fused-$k.txt)"
done
for tool in memcheck racecheck; do
    SI_CUDA_GEMV_TC_PARTS=2 timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --small --gemv --no-bench --types q4_0,q6_k,q2_k,q4_k > $O/san-$tool.txt 2>&1
    step "$tool (parts) test_cuda_kernels --small --gemv rc=$?: $(grep -c '^FAIL' $O/san-$tool.txt) FAIL, $(tail -1 $O/san-$tool.txt)"
done
timeout 60 $B/swiftinfer bench --memory --device cuda --json > $O/memory.json 2> $O/memory.err
step "bench --memory --device cuda rc=$?: $(cat $O/memory.json)"
for sp in llama3-8b:q4_0:8,9,12,16 llama2-7b:q4_0:12,13,16 llama3-8b:q4_k_m:8,9,12,16; do
    IFS=: read -r shape t cs <<< "$sp"
    m=/dev/shm/m-$shape-$t.gguf
    timeout 150 $B/swiftinfer synth -o $m --shape $shape --type $t > /dev/null 2>&1 || { step "synth $shape $t failed"; continue; }
    if [ $t = q4_0 ]; then # batch 1 against the copy bandwidth measured here (no --bw)
        timeout 100 $B/swiftinfer bench --device cuda -m $m -p 0 -n 128 -r 3 > $O/tg-$shape-$t.txt 2>&1
        step "$shape $t tg128 rc=$?: $(grep -E 'GPU copy|tg128' $O/tg-$shape-$t.txt | tr '\n' ' ')"
    fi
    for r in 1 2; do
        for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=1"; do
            f=$O/c-$shape-$t-r$r-$(echo $cfg | tr ' =' '_-').json
            env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c $cs -p 512 -n 128 --json > $f 2> ${f%.json}.err
            step "$shape $t r$r [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
        done
    done
    rm -f $m
done
step done
