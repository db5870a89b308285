#!/usr/bin/env bash
# Session 48, call 2: persist_chain at 5, 6 and 8 rows, dp4a (SI_CUDA_GEMV_Q8X_TC=9) against
# tensor cores (call 1's binary had the old persist_chain, which took none of the six types); then
# the engine at 4-8 requests of 512 + 128 tokens (Llama-2-7B shape) with the
# new tensor-core GEMVs: SI_CUDA_GEMV_Q8X_TC=9 (every type on the dp4a kernel at 2-8 rows)
# against the default, same binary, alternating; Q4_1, Q5_0, Q5_1, Q3_K, IQ4_NL, IQ4_XS and
# llama.cpp's Q3_K_M mixture.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o2; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
if [ -z "${CALL2_TYPES:-}" ]; then
    for t in q4_1 q5_0 q5_1 q3_k iq4_nl iq4_xs; do
        for nb in 5 6 8; do
            for k in 9 $nb; do
                r=$(SI_CUDA_GEMV_Q8X_TC=$k timeout 40 $B/persist_chain $t 10 $nb 2>&1 | grep -E "^ *gemv " | head -1)
                echo "$t nb=$nb SI_CUDA_GEMV_Q8X_TC=$k $r" >> "$O/chain.txt"
            done
        done
        step "persist_chain $t: $(grep -c . "$O/chain.txt") lines; $(tail -1 "$O/chain.txt")"
    done
fi
for t in ${CALL2_TYPES:-iq4_xs q3_k_m q5_0 iq4_nl q4_1 q5_1 q3_k}; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for k in 9 0; do
        f="$O/c-$t-tc$k.json"
        SI_CUDA_GEMV_Q8X_TC=$k timeout 100 $B/swiftinfer bench --device cuda -m $m -c 4,5,6,8 -p 512 -n 128 \
            --json > "$f" 2>> "$O/bench.err"
        step "$t SI_CUDA_GEMV_Q8X_TC=$k 4/5/6/8 requests rc=$?: $(tps "$f")"
    done
    rm -f $m
    [ $(( $(date +%s) - S )) -gt ${CALL2_STOP:-480} ] && { step "stopping: the call's time"; break; }
done
step "done"
