#!/usr/bin/env bash
# Session 50, call 2: the engine at 9, 12, 16 requests of 512 + 128 tokens (all-decoding t/s),
# Llama-2-7B shape, the other types with a tensor-core GEMV: the default (one 16-column launch
# where x fits, else two launches to 12 rows), SI_CUDA_GEMV_TC16=0 (two launches: s49's code)
# and SI_CUDA_GEMV_WIDE=0 (the batched matmul); then the kernel timings of Q4_0 and Q4_K at
# 1-16 rows (test_cuda_kernels --gemv with its benchmark).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o2; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o2.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
for t in q5_k_m q6_k q4_1 q5_0 iq4_xs q3_k_m q2_k; do
    m=/dev/shm/m-$t.gguf
    timeout 120 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC16=0" "SI_CUDA_GEMV_WIDE=0"; do
        f=$O/c-$t-$(echo $cfg | tr ' =' '_-').json
        env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c 9,12,16 -p 512 -n 128 --json > $f 2> ${f%.json}.err
        step "$t [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
    done
    rm -f $m
done
timeout 150 $B/test_cuda_kernels --gemv --types q4_0,q4_k --shape 4096x4096 > $O/kbench-4096.txt 2>&1
timeout 150 $B/test_cuda_kernels --gemv --types q4_0,q4_k --shape 4096x11008 > $O/kbench-11008.txt 2>&1
step "kernel timings rc=$?: $(grep -c '^gemv ' $O/kbench-4096.txt) lines"
step done
