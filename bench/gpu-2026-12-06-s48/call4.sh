#!/usr/bin/env bash
# Session 48, call 4: decode-step graphs of 1-8 rows bucketed exactly (5-7 requests ran 8-row
# steps). run.sh's model part first (test_cuda_model's exactness: steps of 1-8 rows alone and
# batched, now each its own graph); then the engine at 3-8 requests of 512 + 128 tokens
# (Llama-2-7B shape), SI_CUDA_GRAPH_POW2=1 (the old power-of-two buckets) against the default,
# same binary, alternating, for Q8_0 and Q2_K (dp4a at every row count), Q4_0 (tensor cores from 5
# rows) and F16; the start-up line (kernels loaded, graphs captured) of each.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o4; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 220 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
for t in q8_0 q4_0 q2_k f16; do
    m=/tmp/m-$t.gguf
    timeout 150 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for k in 1 0; do
        f="$O/c-$t-pow2$k.json"
        SI_CUDA_GRAPH_POW2=$k timeout 100 $B/swiftinfer bench --device cuda -m $m -c 3,4,5,6,7,8 -p 512 -n 128 \
            --json > "$f" 2> "$O/bench-$t-pow2$k.err"
        step "$t SI_CUDA_GRAPH_POW2=$k 3-8 requests rc=$?: $(tps "$f") | $(grep -m1 'decode kernels loaded' "$O/bench-$t-pow2$k.err")"
    done
    rm -f $m
    [ $(( $(date +%s) - S )) -gt 430 ] && { step "stopping: the call's time"; break; }
done
step "done"
