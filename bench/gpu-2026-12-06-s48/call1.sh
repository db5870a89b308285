#!/usr/bin/env bash
# Session 48, call 1: the 5-8-row tensor-core GEMV for Q4_1, Q5_0, Q5_1, Q3_K, IQ4_NL and IQ4_XS.
# In the order that matters if the call is cut off: test_cuda_decoders; test_cuda_kernels' GEMV
# checks of the six types (every row of 2-8 rows bit for bit against its 1-row run, and the double
# reference); memcheck over their --small GEMV checks; the 129 GEMVs of a Llama-2-7B token
# (persist_chain) at 4-8 rows, dp4a (SI_CUDA_GEMV_Q8X_TC=9) against tensor cores, same binary;
# tg128 of Q4_1 / Q3_K / IQ4_XS, base/swiftinfer (2ddfacc's CUDA code) against swiftinfer (their
# 1-row dot's PTX moved: Q4_1's float step a function, Q3_K / IQ4_XS's last multiply an explicit
# FMA with the add).
# Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o1; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

TYPES=q4_1,q5_0,q5_1,q3_k,iq4_nl,iq4_xs
timeout 30 $B/test_cuda_decoders > "$O/decoders.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$O/decoders.txt")"
timeout 200 $B/test_cuda_kernels --no-bench --gemv --types $TYPES > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types $TYPES rc=$?: $(grep -c '^FAIL' "$O/kernels.txt") FAIL lines, $(tail -1 "$O/kernels.txt")"
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
    --types $TYPES > "$O/sanitize-memcheck.txt" 2>&1
step "memcheck rc=$?: $(tail -1 "$O/sanitize-memcheck.txt")"
for t in ${TYPES//,/ }; do
    for nb in 4 5 6 8; do
        for k in 9 $nb; do
            r=$(SI_CUDA_GEMV_Q8X_TC=$k timeout 40 $B/persist_chain $t 10 $nb 2>&1 | grep -E "^ *gemv " | head -1)
            echo "$t nb=$nb SI_CUDA_GEMV_Q8X_TC=$k $r" >> "$O/chain.txt"
        done
    done
    step "persist_chain $t: $(grep -c . "$O/chain.txt") lines"
done
for t in q4_1 q3_k iq4_xs; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    for r in 1 2; do
        for b in base/swiftinfer swiftinfer; do
            f="$O/tg-$t-${b%%/*}-$r.json"
            timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json > "$f" 2>> "$O/bench.err"
            step "$b $t tg128 round $r rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$f" | tr '\n' ' ')"
        done
    done
    rm -f $m
    [ $(( $(date +%s) - S )) -gt 520 ] && { step "stopping: the call's time"; break; }
done
step "done"
