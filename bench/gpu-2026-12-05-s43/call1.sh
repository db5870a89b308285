#!/usr/bin/env bash
# Session 43, call 1: the model part of tests/cuda/run.sh on 25b626c (the Wq|Wk upload's
# cleanup, built but not run on a GPU in session 42); the batch-1 GEMVs of Q4_0 / Q4_K / Q3_K /
# Q2_K timed alone (test_cuda_kernels --gemv); Llama-2-7B-shape Q3_K and Q2_K tg128 at the
# default (rows a warp, stages) and with the knobs at 2,3 / 2,4 / 1,4 for every batch-1 GEMV:
# whether the stages (bytes in flight) or the decoders hold Q3_K / Q2_K under half the
# bandwidth. Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 240 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$OUT/runsh.txt") PASS, $(grep -c 'FAIL' "$OUT/runsh.txt") FAIL lines, $(tail -1 "$OUT/runsh.txt")"
timeout 120 $B/test_cuda_kernels --gemv --types q4_0,q4_k,q3_k,q2_k > "$OUT/gemv.txt" 2>&1
step "test_cuda_kernels --gemv rc=$?: $(tail -1 "$OUT/gemv.txt")"
for t in q3_k q2_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for v in default 2,3 2,4 1,4; do
            e=(); [ $v != default ] && e=(SI_CUDA_GEMV_Q8X=$v SI_CUDA_GEMV_Q8X_NORM=$v)
            env "${e[@]}" timeout 60 $B/swiftinfer bench --device cuda --bw 3350 -m $m -p 0 -n 128 -r 2 --json \
                > "$OUT/tg-$t-${v/,/x}-$r.json" 2>> "$OUT/bench.err"
            step "$t knob $v tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$OUT/tg-$t-${v/,/x}-$r.json" | tr '\n' ' ')"
        done
    done
    rm -f $m
done
tar czf /tmp/logs.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/logs.tgz "$OUT/"
