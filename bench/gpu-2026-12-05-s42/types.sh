#!/usr/bin/env bash
# The speed of weight types on the GPU, Llama-2-7B shape: `types.sh TYPE...` (default q4_k q5_k
# q5_0), per type a synth, tg128 + pp512 and 8 / 16 requests (about 15 s a type on an H100 after
# its synth, which takes 5-30 s for most types and ~125 s for IQ4_NL / IQ4_XS; SYNTH_TIMEOUT, 200 s
# by default, bounds it). Was bench/gpu-pending-types/call2.sh (sessions 40-41). Run from the
# repository root with the binaries in build-gpucarry (README.md here); one step line each;
# three logs a type land in $OUT (the device tool returns at most 8 files: tar them).
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }


# speed, Llama-2-7B shape: tg128 batch 1 (fraction of 4.21 TB/s) and pp512, Q4_K as the
#    control; 8 and 16 requests (5-8-row GEMVs; 16 rows: the int8 tensor-core matmul, Q2_K's
#    dequantise + cuBLASLt)
for t in ${@:-q4_k q5_k q5_0}; do
    m=/tmp/m-$t.gguf
    timeout ${SYNTH_TIMEOUT:-200} $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    timeout 120 $B/swiftinfer bench --device cuda --bw 4210 -m $m -p 512 -n 128 -r 2 --json \
        > "$OUT/bench-$t.json" 2> "$OUT/bench-$t.err"
    step "bench $t rc=$?: $(tr -d '\n' < "$OUT/bench-$t.json" | cut -c1-400)"
    timeout 150 $B/swiftinfer bench --device cuda -m $m -c 8,16 -p 512 -n 128 --json \
        > "$OUT/bench-$t-c.json" 2>> "$OUT/bench-$t.err"
    step "bench $t -c 8,16 rc=$?: $(tr -d '\n' < "$OUT/bench-$t-c.json" | cut -c1-400)"
    rm -f $m
done
