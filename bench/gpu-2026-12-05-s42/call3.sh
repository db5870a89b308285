#!/usr/bin/env bash
# Session 42, call 3: IQ4_NL / IQ4_XS with the 13-instruction table lookup (dequant.cuh,
# si_iq4nl_word) against the lookup before it (swiftinfer-before). The kernel tests of the IQ4
# types, then per type one synth of the Llama-2-7B shape and tg128 (batch 1) plus 8 requests,
# before and after alternating, two rounds. Run from the repository root with the binaries in
# build-gpucarry (README.md here); logs in $OUT, one step line each on stdout.
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

$B/test_cuda_decoders > "$OUT/tests.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$OUT/tests.txt")"
$B/test_cuda_kernels --no-bench --types iq4_nl,iq4_xs >> "$OUT/tests.txt" 2>&1
step "test_cuda_kernels iq4 rc=$?: $(tail -1 "$OUT/tests.txt")"

for t in ${@:-iq4_xs iq4_nl}; do
    m=/tmp/m-$t.gguf
    timeout 300 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    step "synth $t"
    for r in 1 2; do
        for b in swiftinfer-before swiftinfer; do
            timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json \
                > "$OUT/tg-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$OUT/tg-$t-$b-$r.json" | tr '\n' ' ')"
            timeout 60 $B/$b bench --device cuda -m $m -c 8 -p 512 -n 128 --json \
                > "$OUT/c8-$t-$b-$r.json" 2>> "$OUT/bench.err"
            step "$b $t 8 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$OUT/c8-$t-$b-$r.json")"
        done
    done
    rm -f $m
done
(cd "$OUT" && tar czf logs.tgz ./*.json ./*.err ./*.txt && rm -f ./*.json ./*.err ./*.txt)
