#!/usr/bin/env bash
# s36 device call 6: run.sh's sampler part with racecheck at 1 and 2 CTAs a row (the run.sh
# change), and 8 rows at 16 CTAs a row (SI_CUDA_SAMPLE_CLUSTER=16) against the default (8).
# build-gpucarry/: 3631ca4's binaries (call 4's).
set -u
B=build-gpucarry
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -E "^(PASS|FAIL)|memcheck|racecheck|RUN.SH|FAILED" "$OUT/runsh.txt" | grep -v "^PASS logprobs" | head -30
for r in 1 2; do
    $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/d_$r.txt
    SI_CUDA_SAMPLE_CLUSTER=16 $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/c16_$r.txt
done
{ for r in 1 2; do for v in d c16; do echo "-- $v, round $r"; cat /tmp/${v}_$r.txt; done; done; } > "$OUT/sample_timing.txt"
grep -E "^--|128256" "$OUT/sample_timing.txt"
