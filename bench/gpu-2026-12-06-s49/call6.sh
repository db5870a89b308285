#!/usr/bin/env bash
# Session 49, call 6: where the step of 9 requests loses against 8 (call 5: Q4_0 2,311 -> 1,455
# all-decoding t/s). Llama-2-7B shape, Q4_0 and Q8_0, 8 and 9 requests of 512 + 128 tokens, with
# SI_CUDA_STEP_TIMING=1 (a step's GPU time, the host's time in the call, start to start), plain
# and with parts of every layer left out (SI_CUDA_SKIP: 12 RoPE + KV write and attention, 338
# the four matmuls, 161 the two norms and SwiGLU; outputs then garbage, timings only).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o6; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o6.tgz" -C $O .; }
for t in q4_0 q8_0; do
    m=/dev/shm/m-$t.gguf
    timeout 120 build-gpucarry/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    for c in 8 9; do
        for sk in 0 12 338 161; do
            f=$O/$t-c$c-skip$sk.txt
            SI_CUDA_SKIP=$sk SI_CUDA_STEP_TIMING=1 timeout 60 build-gpucarry/swiftinfer bench --device cuda -m $m -c $c -p 512 -n 128 > $f 2>&1
            step "$t c=$c skip=$sk rc=$?: all-decoding $(awk -F'|' -v c=$c 'NF > 9 && $4 + 0 == c { print $9 }' $f | tr -d ' ') | $(grep -i 'step timing' $f | tr -s ' ' | cut -c1-230 | tr '\n' ' ')"
        done
    done
    rm -f $m
done
step done
