#!/usr/bin/env bash
# The second device call of the opt-in weight types (README.md here): their speed, after call1.sh
# passed: `call2.sh TYPE...` (default q4_k q5_k q5_0; about 100 s a type, so at most 5 a call).
# Run from the repository root with the binaries in build-gpucarry. Each step prints one line;
# logs land in $OUT.
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
