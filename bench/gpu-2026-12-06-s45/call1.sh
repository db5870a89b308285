#!/usr/bin/env bash
# The device call of decoders.patch (README.md here), written for session 43 and widened in
# session 44 (neither got a machine for it). The model part of tests/cuda/run.sh on the patched
# code; test_cuda_kernels --gemv for the seven types the patch
# touches, the binary before it and the patched one (checks of the new code, the GEMVs alone
# timed side by side); test_cuda_fused (the norm-fused GEMVs); every test_cuda_kernels check of
# those types (1-8-row GEMVs, the matmuls that dequantise); Llama-2-7B-shape Q3_K, Q2_K, Q6_K,
# Q5_0 tg128 (2 rounds) and Q2_K / Q6_K at 8 requests of 512 + 128 tokens (round 1; their 8-row
# kernels hold more registers patched), before/swiftinfer and swiftinfer (patched) alternating.
# Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
# logs in /tmp/o, packed into $OUT after every step (a call cut off at its limit keeps them)
O=/tmp/o; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 200 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
TYPES=q3_k,q2_k,q6_k,q5_0,q5_1,iq4_nl,iq4_xs
for k in before/test_cuda_kernels test_cuda_kernels; do
    timeout 150 $B/$k --gemv --types $TYPES > "$O/gemv-${k%%/*}.txt" 2>&1
    step "$k --gemv rc=$?: $(tail -1 "$O/gemv-${k%%/*}.txt")"
done
timeout 100 $B/test_cuda_fused --no-bench > "$O/fused.txt" 2>&1
step "test_cuda_fused --no-bench rc=$?: $(tail -1 "$O/fused.txt")"
timeout 150 $B/test_cuda_kernels --no-bench --types $TYPES > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench rc=$?: $(tail -1 "$O/kernels.txt")"
for t in q3_k q2_k q6_k q5_0; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in before/swiftinfer swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 3350 -m $m -p 0 -n 128 -r 2 --json \
                > "$O/tg-$t-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$O/tg-$t-${b%%/*}-$r.json" | tr '\n' ' ')"
            [ $r = 1 ] && { [ $t = q6_k ] || [ $t = q2_k ]; } || continue
            timeout 60 $B/$b bench --device cuda -m $m -c 8 -p 512 -n 128 --json \
                > "$O/c8-$t-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b $t 8 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$O/c8-$t-${b%%/*}-$r.json")"
        done
    done
    rm -f $m
done
