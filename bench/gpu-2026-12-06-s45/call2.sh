#!/usr/bin/env bash
# Session 45, call 2: the decoder patch as landed (bench/gpu-2026-12-06-s45/decoders.patch less
# its Q6_K unit, which call 1 measured slower) checked on the GPU, kept short (the session's
# device time was mostly spent on refusals): every test_cuda_kernels check (all types, no
# timings); memcheck over the --small checks of the six changed types; run.sh's model part;
# racecheck as memcheck; then Llama-2-7B-shape Q5_1 and Q6_K tg128 (2 rounds) and Q6_K at 8 requests,
# before/swiftinfer (6e38aeb) and swiftinfer alternating.
# Run from the repository root with the binaries in build-gpucarry (README.md here).
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

TYPES=q5_0,q5_1,q3_k,q2_k,iq4_nl,iq4_xs
timeout 120 $B/test_cuda_kernels --no-bench > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench rc=$?: $(tail -1 "$O/kernels.txt")"
san() {
    timeout 90 compute-sanitizer --tool $1 --error-exitcode 3 $B/test_cuda_kernels --small --types $TYPES \
        > "$O/sanitize-$1.txt" 2>&1
    step "$1 rc=$?: $(tail -1 "$O/sanitize-$1.txt")"
}
san memcheck
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 150 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
san racecheck
for t in q5_1 q6_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in before/swiftinfer swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 3350 -m $m -p 0 -n 128 -r 2 --json \
                > "$O/tg-$t-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$O/tg-$t-${b%%/*}-$r.json" | tr '\n' ' ')"
            [ $r = 1 ] && [ $t = q6_k ] || continue
            timeout 60 $B/$b bench --device cuda -m $m -c 8 -p 512 -n 128 --json \
                > "$O/c8-$t-${b%%/*}-$r.json" 2>> "$O/bench.err"
            step "$b $t 8 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$O/c8-$t-${b%%/*}-$r.json")"
        done
    done
    rm -f $m
done
