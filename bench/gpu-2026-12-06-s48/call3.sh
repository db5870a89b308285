#!/usr/bin/env bash
# Session 48, call 3, on the final binaries (Q3_K's tensor-core GEMV from 8 rows): run.sh's model
# part (engine exactness on the tiny models of every type, tiny-q4_1 new, the rest as before);
# racecheck over the six types' --small GEMV checks; then the engine at 4-8 requests for IQ4_XS and
# IQ4_NL, dp4a (SI_CUDA_GEMV_Q8X_TC=9) against the default (call 2's synth of them ran past its
# 100 s), while the call's time lasts.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o3; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 220 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
    --types q4_1,q5_0,q5_1,q3_k,iq4_nl,iq4_xs > "$O/sanitize-racecheck.txt" 2>&1
step "racecheck rc=$?: $(tail -1 "$O/sanitize-racecheck.txt")"
for t in iq4_xs iq4_nl; do
    [ $(( $(date +%s) - S )) -gt 330 ] && { step "stopping before $t: the call's time"; break; }
    m=/tmp/m-$t.gguf
    timeout 220 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for k in 9 0; do
        f="$O/c-$t-tc$k.json"
        SI_CUDA_GEMV_Q8X_TC=$k timeout 100 $B/swiftinfer bench --device cuda -m $m -c 4,5,6,8 -p 512 -n 128 \
            --json > "$f" 2>> "$O/bench.err"
        step "$t SI_CUDA_GEMV_Q8X_TC=$k 4/5/6/8 requests rc=$?: $(tps "$f")"
    done
    rm -f $m
done
step "done"
