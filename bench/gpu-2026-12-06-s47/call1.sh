#!/usr/bin/env bash
# Session 47, call 1: Q5_K and Q6_K GEMVs of 5-8 rows on int8 tensor cores (6ff4908), in the
# order that matters if the call is cut off: test_cuda_decoders; test_cuda_kernels' GEMV checks
# of the four tensor-core types (every row of 2-8 rows bit for bit against its 1-row run, and the
# double reference); memcheck over their --small GEMV checks; the 129 GEMVs of a Llama-2-7B token
# (persist_chain) at 4-8 rows, dp4a (SI_CUDA_GEMV_Q8X_TC=9) against tensor cores, same binary;
# run.sh's model part (engine exactness on tiny q5_k / q6_k / q4_k_m / q5_k_m among the rest);
# racecheck as memcheck.
# Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

TYPES=q4_0,q4_k,q5_k,q6_k
timeout 30 $B/test_cuda_decoders > "$O/decoders.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$O/decoders.txt")"
timeout 150 $B/test_cuda_kernels --no-bench --gemv --types $TYPES > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types $TYPES rc=$?: $(tail -1 "$O/kernels.txt")"
san() {
    timeout 90 compute-sanitizer --tool $1 --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
        --types q5_k,q6_k > "$O/sanitize-$1.txt" 2>&1
    step "$1 rc=$?: $(tail -1 "$O/sanitize-$1.txt")"
}
san memcheck
for t in q5_k q6_k; do
    for nb in 4 5 6 8; do
        for k in 9 $nb; do
            r=$(SI_CUDA_GEMV_Q8X_TC=$k timeout 40 $B/persist_chain $t 10 $nb 2>&1 | grep -E "^ *gemv " | head -1)
            echo "$t nb=$nb SI_CUDA_GEMV_Q8X_TC=$k $r" >> "$O/chain.txt"
        done
    done
    step "persist_chain $t: $(grep -c . "$O/chain.txt") lines"
done
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 200 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
san racecheck
