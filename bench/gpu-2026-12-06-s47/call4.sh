#!/usr/bin/env bash
# Session 47, call 4: Q6_K's unit dot adds itself to a lane's sum with one explicit FMA in both
# kernels (q8x_dot_add / fold_add) instead of call 2-3's unfused multiply (tg128 -2.3 %): the
# GEMV checks of the four tensor-core types, memcheck over Q6_K's --small ones, test_cuda_fused;
# Q6_K tg128 base/swiftinfer (f041b07) and swiftinfer alternating, three rounds; the 129 GEMVs of
# a Llama-2-7B Q6_K token at 5 / 6 / 8 rows; run.sh's model part if the time allows.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o4; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
timeout 150 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q5_k,q6_k > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q5_k,q6_k rc=$?: $(tail -1 "$O/kernels.txt")"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
    --types q6_k > "$O/sanitize-memcheck.txt" 2>&1
step "memcheck q6_k rc=$?: $(tail -1 "$O/sanitize-memcheck.txt")"
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
timeout 100 $B/test_cuda_fused --no-bench > "$O/fused.txt" 2>&1
step "test_cuda_fused rc=$?: $(tail -1 "$O/fused.txt")"
if [ $(( $(date +%s) - S )) -lt 330 ]; then
    OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 220 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
    step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
fi
