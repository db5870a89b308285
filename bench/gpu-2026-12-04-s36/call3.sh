#!/usr/bin/env bash
# s36 device call 3: the selection's digit totals in shared memory, the weights' division as a
# multiplication (div_to_float.cuh), a 16-CTA cluster for up to 4 rows.
# build-gpucarry/: the change's swiftinfer, test_cuda_sample; prev-test_cuda_sample: 2dfc32e's
# (smp_each); base-test_cuda_sample, swiftinfer-base: 07567ed's (the session's start).
set -u
B=build-gpucarry
for r in 1 2; do
    $B/base-test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/base_$r.txt
    $B/prev-test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/prev_$r.txt
    $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/new_$r.txt
    SI_CUDA_SAMPLE_CLUSTER=8 $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/new8_$r.txt
done
{ for r in 1 2; do for v in new new8 prev base; do echo "-- $v, round $r"; cat /tmp/${v}_$r.txt; done; done; } > "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (whole, sanitizers, cluster sizes 1 2 4 16)"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -E "^(PASS|FAIL)|memcheck|racecheck|RUN.SH|==" "$OUT/runsh.txt" | head -40
ncu --clock-control none --set full -k regex:sample_kernel --launch-skip 210 --launch-count 1 \
    -o /tmp/p210 $B/prof-test_cuda_sample --time-only > /tmp/ncu.log 2>&1
ncu -i /tmp/p210.ncu-rep --page details > "$OUT/details210.txt" 2>&1
grep -E "Duration|Executed Ipc Active|Executed Instructions  |Eligible Warps" "$OUT/details210.txt"
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for chain in "--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0" "--temp 1 --top-k 0 --top-p 1 --min-p 0" "--temp 0.8"; do
for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "llama3-8b q4_0 [$chain] $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 $chain 2>&1 >/dev/null | grep generation)"
done; done; done
} | tee "$OUT/run.txt"
