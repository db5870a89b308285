#!/usr/bin/env bash
# Session 47, call 6: Q4_0 and Q4_K at 5 / 6 / 8 requests (512 + 128 tokens, Llama-2-7B shape),
# base/swiftinfer (f041b07) and swiftinfer alternating, two rounds: their tensor-core GEMVs'
# code was reshaped for Q5_K / Q6_K (per-type chunk rows, the fold_add branch), same arithmetic.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o6; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
for t in q4_0 q4_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in base/swiftinfer swiftinfer; do
            f="$O/c-$t-${b%%/*}-$r.json"
            timeout 60 $B/$b bench --device cuda -m $m -c 5,6,8 -p 512 -n 128 --json > "$f" 2>> "$O/bench.err"
            step "$b $t 5/6/8 requests rc=$?: $(tps "$f")"
        done
    done
    rm -f $m
done
