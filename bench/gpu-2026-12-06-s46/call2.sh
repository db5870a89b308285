#!/usr/bin/env bash
# Session 46, call 2 (the warm machine's last minutes): Llama-2-7B-shape Q2_K at 64 requests of
# 512 + 128 tokens, base/swiftinfer (4454050) and swiftinfer (f041b07), one round.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o2; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
m=/tmp/m-q2_k.gguf
timeout 90 $B/swiftinfer synth -o $m --shape llama2-7b --type q2_k > /dev/null 2>&1 || { step "synth failed"; exit 1; }
step "synth q2_k"
for b in base/swiftinfer swiftinfer; do
    timeout 80 $B/$b bench --device cuda -m $m -c 64 -p 512 -n 128 --json > "$O/c64-q2_k-${b%%/*}.json" 2>> "$O/bench.err"
    step "$b q2_k 64 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$O/c64-q2_k-${b%%/*}.json")"
done
