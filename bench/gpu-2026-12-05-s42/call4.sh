#!/usr/bin/env bash
# Session 42, call 4: IQ4_NL / IQ4_XS GEMVs in the 4-bit types' batch cases (gemv_q8x.cuh,
# q8x_four_bit: 2,3 stages for the output projection and down, 2,2 for the output matrix, 4 rows
# a warp at 2-4 rows) on top of call 3's lookup. The IQ4 kernel tests, the model part of
# tests/cuda/run.sh (every tiny model, IQ4 ones among them), then IQ4_XS tg128 and 2 / 4 / 8
# requests, swiftinfer-before (call 3's binary) and swiftinfer alternating, two rounds. Run from
# the repository root with the binaries in build-gpucarry (README.md here); logs in $OUT (a tar).
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

$B/test_cuda_decoders > "$OUT/tests.txt" 2>&1
step "test_cuda_decoders rc=$?: $(tail -1 "$OUT/tests.txt")"
$B/test_cuda_kernels --no-bench --types iq4_nl,iq4_xs >> "$OUT/tests.txt" 2>&1
step "test_cuda_kernels iq4 rc=$?: $(grep -c '^FAIL' "$OUT/tests.txt") FAIL lines, $(tail -1 "$OUT/tests.txt")"
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 300 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$OUT/runsh.txt") PASS, $(grep -c 'FAIL' "$OUT/runsh.txt") FAIL lines, $(tail -1 "$OUT/runsh.txt")"

m=/tmp/m-iq4_xs.gguf
timeout 300 $B/swiftinfer synth -o $m --shape llama2-7b --type iq4_xs > /dev/null 2>&1 || { step "synth failed"; exit 1; }
step "synth iq4_xs"
for r in 1 2; do
    for b in swiftinfer-before swiftinfer; do
        timeout 60 $B/$b bench --device cuda --bw 4210 -m $m -p 0 -n 128 -r 2 --json \
            > "$OUT/tg-$b-$r.json" 2>> "$OUT/bench.err"
        step "$b tg128 rc=$?: $(grep -o '"avg_ts": [0-9.]*' "$OUT/tg-$b-$r.json" | tr '\n' ' ')"
        timeout 90 $B/$b bench --device cuda -m $m -c 2,4,8 -p 512 -n 128 --json \
            > "$OUT/c-$b-$r.json" 2>> "$OUT/bench.err"
        step "$b 2/4/8 requests rc=$?: $(grep -o '"all_decoding_tps": [0-9.]*' "$OUT/c-$b-$r.json" | tr '\n' ' ')"
    done
done
(cd "$OUT" && tar czf logs.tgz --exclude=logs.tgz . && find . -type f ! -name logs.tgz -delete)
