#!/usr/bin/env bash
# Session 42, call 5: Wq and Wk as one matrix when only Wv's type differs (llama.cpp's Q4_K_M /
# Q5_K_M / Q3_K_M layers with another attn_v type; cuda_weights.c qk_fused), both GEMVs with the
# norm inside at one row. The model part of tests/cuda/run.sh (tiny q3_k_m / q4_k_m / q5_k_m
# logits against the CPU, the engine's exactness), then Llama-2-7B-shape Q4_K_M and Q5_K_M tg128
# and 4 requests, swiftinfer-before (the code before, 9c90a74) and swiftinfer alternating, two
# rounds. Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 240 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$OUT/runsh.txt") PASS, $(grep -c 'FAIL' "$OUT/runsh.txt") FAIL lines, $(tail -1 "$OUT/runsh.txt")"
for t in ${@:-q4_k_m q5_k_m}; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in swiftinfer-before swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json \
                > "$OUT/tg-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$OUT/tg-$t-$b-$r.json" | tr '\n' ' ')"
            timeout 60 $B/$b bench --device cuda -m $m -c 4 -p 512 -n 128 --json \
                > "$OUT/c4-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t 4 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$OUT/c4-$t-$b-$r.json")"
        done
    done
    rm -f $m
done
tar czf /tmp/logs.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/logs.tgz "$OUT/"
