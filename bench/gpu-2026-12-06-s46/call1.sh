#!/usr/bin/env bash
# Session 46, call 1: session 45's landed CUDA code (4454050) checked as one binary at last
# (bench/gpu-2026-12-06-s45/call2.sh never got a machine), together with this session's Q2_K
# tensor-core fragments (9-128-row matmuls), in the order that matters if the call is cut off:
# test_cuda_decoders; every test_cuda_kernels check of the types whose code changed (no timings;
# the new Q2_K matmul among them); memcheck over their --small checks; run.sh's model part; the
# Q2_K matmul timed against dequantise + cuBLASLt; Llama-2-7B-shape Q2_K at 8 / 16 / 32
# requests, base/swiftinfer (4454050) and swiftinfer alternating (a second round if the time
# allows); racecheck as memcheck; Q5_1 and Q6_K tg128 (call2.sh's remainder).
# Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

TYPES=q5_0,q5_1,q3_k,q2_k,iq4_nl,iq4_xs
timeout 30 $B/test_cuda_decoders > "$O/decoders.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$O/decoders.txt")"
timeout 150 $B/test_cuda_kernels --no-bench --types $TYPES > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --types $TYPES rc=$?: $(tail -1 "$O/kernels.txt")"
san() {
    timeout 90 compute-sanitizer --tool $1 --error-exitcode 3 $B/test_cuda_kernels --small --types $TYPES \
        > "$O/sanitize-$1.txt" 2>&1
    step "$1 rc=$?: $(tail -1 "$O/sanitize-$1.txt")"
}
san memcheck
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 170 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
timeout 120 $B/test_cuda_kernels --mmq --types q2_k > "$O/mmq-q2_k.txt" 2>&1
step "test_cuda_kernels --mmq q2_k rc=$?: $(tail -1 "$O/mmq-q2_k.txt")"
m=/tmp/m-q2_k.gguf
if timeout 120 $B/swiftinfer synth -o $m --shape llama2-7b --type q2_k > /dev/null 2>&1; then
    step "synth q2_k"
    for r in 1 2; do
        [ $r = 2 ] && [ $(( $(date +%s) - S )) -gt 400 ] && break # the device time left
        for b in base/swiftinfer swiftinfer; do
            timeout 90 $B/$b bench --device cuda -m $m -c 8,16,32 -p 512 -n 128 --json \
                > "$O/c-q2_k-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b q2_k 8/16/32 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$O/c-q2_k-${b%%/*}-$r.json" | tr '\n' ' ')"
        done
    done
    rm -f $m
else
    step "synth q2_k failed"
fi
san racecheck
for t in q5_1 q6_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for b in base/swiftinfer swiftinfer; do
        timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json \
            > "$O/tg-$t-${b%%/*}.json" 2>> "$O/bench.err"
        step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$O/tg-$t-${b%%/*}.json" | tr '\n' ' ')"
    done
    rm -f $m
done
