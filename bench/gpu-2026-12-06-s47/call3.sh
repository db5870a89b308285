#!/usr/bin/env bash
# Session 47, call 3: Q6_K tg128 again, base/swiftinfer (f041b07) and swiftinfer alternating,
# three rounds (call 2's one round had 420 against 410 t/s: Q6_K's unit dot now multiplies and
# adds where it fused them); then run.sh's model part on the final binaries.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o3; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
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
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 220 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
