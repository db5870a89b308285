#!/usr/bin/env bash
# Session 47, call 2: the fix's GEMV checks (call 1 found Q6_K rows of more than one segment with
# other bits on tensor cores); the engine at 4-8 requests of 512 + 128 tokens (Llama-2-7B shape)
# with the Q5_K / Q6_K tensor-core GEMVs, SI_CUDA_GEMV_Q8X_TC=9 (every type on the dp4a kernel at
# 2-8 rows) against the default, same binary, alternating; Q5_K, Q6_K and llama.cpp's Q4_K_M and
# Q5_K_M mixtures; then tg128 of Q6_K and Q5_K, base/swiftinfer (f041b07) against swiftinfer (the
# dp4a units' sums split from their float part; Q6_K's last multiply no longer fused).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o2; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
tps() { grep -o '"all_decoding_tps": [0-9.]*' "$1" | awk '{printf "%s ", $2}'; }
# call 1 found Q6_K's rows of more than one segment with other bits on tensor cores (the dp4a
# kernel fused the unit's last multiply into its sum's add): the fix's checks first
timeout 150 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q5_k,q6_k > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q5_k,q6_k rc=$?: $(tail -1 "$O/kernels.txt")"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --gemv \
    --types q6_k > "$O/sanitize-memcheck.txt" 2>&1
step "memcheck q6_k rc=$?: $(tail -1 "$O/sanitize-memcheck.txt")"
timeout 100 $B/test_cuda_fused --no-bench > "$O/fused.txt" 2>&1
step "test_cuda_fused rc=$?: $(tail -1 "$O/fused.txt")"
for t in q5_k_m q4_k_m q6_k q5_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for k in 9 0; do
        f="$O/c-$t-tc$k.json"
        SI_CUDA_GEMV_Q8X_TC=$k timeout 100 $B/swiftinfer bench --device cuda -m $m -c 4,5,6,8 -p 512 -n 128 \
            --json > "$f" 2>> "$O/bench.err"
        step "$t SI_CUDA_GEMV_Q8X_TC=$k 4/5/6/8 requests rc=$?: $(tps "$f")"
    done
    case $t in q6_k|q5_k)
        for b in base/swiftinfer swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json \
                > "$O/tg-$t-${b%%/*}.json" 2>> "$O/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$O/tg-$t-${b%%/*}.json" | tr '\n' ' ')"
        done ;;
    esac
    rm -f $m
    [ $(( $(date +%s) - S )) -gt 480 ] && { step "stopping: the call's time"; break; }
done
