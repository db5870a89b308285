#!/usr/bin/env bash
# Session 48, call 5: call 4's engine A/B again, a second round in the other order (the default
# exact buckets first, then SI_CUDA_GRAPH_POW2=1), for Q8_0, Q4_0 and F16 (same binaries).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o5; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
for t in q8_0 q4_0 f16; do
    m=/tmp/m-$t.gguf
    timeout 150 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    for k in 0 1; do
        f="$O/c-$t-pow2$k.json"
        SI_CUDA_GRAPH_POW2=$k timeout 100 $B/swiftinfer bench --device cuda -m $m -c 3,4,5,6,7,8 -p 512 -n 128 \
            --json > "$f" 2> "$O/bench-$t-pow2$k.err"
        step "$t SI_CUDA_GRAPH_POW2=$k 3-8 requests rc=$?: $(tps "$f")"
    done
    rm -f $m
done
step "done"
