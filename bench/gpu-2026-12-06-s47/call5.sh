#!/usr/bin/env bash
# Session 47, call 5: Q6_K's dot back in its old instruction order (the PTX of its 1-row GEMVs
# now base's, the last FMA's operands aside): the GEMV checks of Q6_K and Q5_K, Q6_K tg128
# base/swiftinfer (f041b07) and swiftinfer alternating, three rounds, and its 129 GEMVs at 1 / 5 /
# 6 / 8 rows.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o5; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
timeout 100 $B/test_cuda_kernels --no-bench --gemv --types q5_k,q6_k > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types q5_k,q6_k rc=$?: $(tail -1 "$O/kernels.txt")"
m=/tmp/m-q6_k.gguf
if timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type q6_k > /dev/null 2>&1; then
    step "synth q6_k"
    for r in 1 2 3; do
        for b in base/swiftinfer swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 3 --json \
                > "$O/tg-q6_k-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b q6_k tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$O/tg-q6_k-${b%%/*}-$r.json" | tr '\n' ' ')"
        done
    done
    rm -f $m
fi
for nb in 1 5 6 8; do
    r=$(timeout 40 $B/persist_chain q6_k 10 $nb 2>&1 | grep -E "^ *gemv " | head -1)
    echo "q6_k nb=$nb $r" >> "$O/chain.txt"
done
step "persist_chain q6_k: $(cut -c1-60 "$O/chain.txt" | tr '\n' ';')"
