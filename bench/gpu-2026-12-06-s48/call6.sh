#!/usr/bin/env bash
# Session 48, call 6: Q2_K's 5-8-row GEMV on int8 tensor cores (its mins a 16 take each x block's
# first 16's sum, computed in one more pass over x). test_cuda_decoders; test_cuda_kernels' GEMV
# checks of Q2_K (every row of 2-8 rows bit for bit against its 1-row run); memcheck over its
# --small checks; the 129 GEMVs of a Llama-2-7B token at 5, 6, 8 rows, dp4a against tensor cores;
# run.sh's model part (tiny Q2_K and Q3_K_M among the models); then, while the call's time lasts,
# the engine at 4-8 requests (dp4a against the default), Q2_K tg128 base (2ddfacc's code) against
# this binary (its 1-row dot now calls step() / msum()), racecheck.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o6; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
timeout 30 $B/test_cuda_decoders > "$O/decoders.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$O/decoders.txt")"
timeout 100 $B/test_cuda_kernels --no-bench --gemv --types q2_k > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types q2_k rc=$?: $(grep -c '^FAIL' "$O/kernels.txt") FAIL lines, $(tail -1 "$O/kernels.txt")"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
    --types q2_k > "$O/sanitize-memcheck.txt" 2>&1
step "memcheck rc=$?: $(tail -1 "$O/sanitize-memcheck.txt")"
for nb in 5 6 8; do
    for k in 9 $nb; do
        r=$(SI_CUDA_GEMV_Q8X_TC=$k timeout 40 $B/persist_chain q2_k 10 $nb 2>&1 | grep -E "^ *gemv " | head -1)
        echo "q2_k nb=$nb SI_CUDA_GEMV_Q8X_TC=$k $r" >> "$O/chain.txt"
    done
done
step "persist_chain q2_k: $(grep -c 'us a token' "$O/chain.txt") lines; $(tail -1 "$O/chain.txt")"
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 200 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
m=/tmp/m-q2_k.gguf
if [ $(( $(date +%s) - S )) -lt 200 ] && timeout 120 $B/swiftinfer synth -o $m --shape llama2-7b --type q2_k > /dev/null 2>&1; then
    step "synth q2_k"
    for k in 9 0; do
        f="$O/c-q2_k-tc$k.json"
        SI_CUDA_GEMV_Q8X_TC=$k timeout 60 $B/swiftinfer bench --device cuda -m $m -c 4,5,6,8 -p 512 -n 128 \
            --json > "$f" 2>> "$O/bench.err"
        step "q2_k SI_CUDA_GEMV_Q8X_TC=$k 4/5/6/8 requests rc=$?: $(tps "$f")"
    done
    for b in base/swiftinfer swiftinfer; do
        f="$O/tg-q2_k-${b%%/*}.json"
        timeout 40 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json > "$f" 2>> "$O/bench.err"
        step "$b q2_k tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$f" | tr '\n' ' ')"
    done
fi
[ $(( $(date +%s) - S )) -lt 330 ] && {
    timeout 40 compute-sanitizer --tool racecheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
        --types q2_k > "$O/sanitize-racecheck.txt" 2>&1
    step "racecheck rc=$?: $(tail -1 "$O/sanitize-racecheck.txt")"
}
step "done"
