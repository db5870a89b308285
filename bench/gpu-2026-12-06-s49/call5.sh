#!/usr/bin/env bash
# Session 49, call 5: is there a step down from 8 requests (the 1-8-row GEMVs, tensor cores from
# 5 rows) to 9-16 (the int8 tensor-core matmul, rows padded to 16)? The engine at 4, 8, 9, 12 and
# 16 requests of 512-token prompts + 128 generated tokens, all-decoding t/s, Llama-2-7B shape,
# Q4_0, Q4_K_M and Q8_0, final binaries.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o5; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o5.tgz" -C $O .; }
for t in q4_0 q4_k_m q8_0; do
    m=/dev/shm/m-$t.gguf
    timeout 120 build-gpucarry/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    timeout 150 build-gpucarry/swiftinfer bench --device cuda -m $m -c 4,8,9,12,16 -p 512 -n 128 --json > $O/c-$t.json 2> $O/c-$t.err
    step "$t rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $O/c-$t.json | tr '\n' ' ')"
    rm -f $m
done
step done
