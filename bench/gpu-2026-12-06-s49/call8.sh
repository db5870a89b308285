#!/usr/bin/env bash
# Session 49, call 8: the final code (9-12 rows as two GEMV launches, Q4_0 and Q5_K 9-16;
# attention split to 8 rows as before). test_cuda_kernels' GEMV checks of Q4_0, Q5_K, Q4_K
# (1..16, 1..16, 1..12 rows the same bits); the engine at 8, 12, 13, 16 requests, Q4_K_M
# (13-16 rows back on the batched matmul for Q4_K and Q6_K) and Q4_0.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o8; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o8.tgz" -C $O .; }
timeout 60 build-gpucarry/test_cuda_kernels --no-bench --gemv --types q4_0,q5_k,q4_k > $O/kernels.txt 2>&1
step "test_cuda_kernels rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines; $(grep -o 'same bits nb 1..[0-9]*' $O/kernels.txt | sort | uniq -c | tr '\n' ' '); $(tail -1 $O/kernels.txt)"
for t in q4_k_m q4_0; do
    m=/dev/shm/m-$t.gguf
    timeout 60 build-gpucarry/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    f=$O/c-$t.json
    timeout 60 build-gpucarry/swiftinfer bench --device cuda -m $m -c 8,12,13,16 -p 512 -n 128 --json > $f 2> ${f%.json}.err
    step "$t rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
    rm -f $m
done
step done
