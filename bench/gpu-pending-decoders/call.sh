#!/usr/bin/env bash
# The pending device call of decoders.patch (README.md here): test_cuda_kernels --gemv for the
# six types the patch touches (checks and timings of the new code), Llama-2-7B-shape Q3_K, Q2_K
# and Q6_K tg128 and 8 requests, swiftinfer-before (the commit the patch applies to) and
# swiftinfer (patched) alternating, two rounds, then the model part of tests/cuda/run.sh on the
# patched code. Run from the repository root with the binaries in build-gpucarry; written for
# session 43, which got no device after its first call.
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

timeout 120 $B/test_cuda_kernels --gemv --types q3_k,q2_k,iq4_nl,iq4_xs,q5_0,q6_k > "$OUT/gemv.txt" 2>&1
step "test_cuda_kernels --gemv rc=$?: $(tail -1 "$OUT/gemv.txt")"
grep -E "^gemv  (q[2356]_[k0]|iq4).*nb=1 " "$OUT/gemv.txt"
for t in q3_k q2_k q6_k; do
    m=/tmp/m-$t.gguf
    timeout 100 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in swiftinfer-before swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 3350 -m $m -p 0 -n 128 -r 2 --json \
                > "$OUT/tg-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$OUT/tg-$t-$b-$r.json" | tr '\n' ' ')"
            [ $r = 1 ] || continue
            timeout 60 $B/$b bench --device cuda -m $m -c 8 -p 512 -n 128 --json \
                > "$OUT/c8-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t 8 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$OUT/c8-$t-$b-$r.json")"
        done
    done
    rm -f $m
done
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 240 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$OUT/runsh.txt") PASS, $(grep -c 'FAIL' "$OUT/runsh.txt") FAIL lines, $(tail -1 "$OUT/runsh.txt")"
tar czf /tmp/logs.tgz -C "$OUT" . && find "$OUT" -type f -delete && mv /tmp/logs.tgz "$OUT/"
