#!/usr/bin/env bash
# s36 device call 7: a selection's last bucket (<= 512 elements) gathered into CTA 0 and walked
# there instead of more radix passes. build-gpucarry/: the change's swiftinfer, test_cuda_sample;
# prev-test_cuda_sample, swiftinfer-prev: b511d0c's (3631ca4's sampler); base: 07567ed's.
set -u
B=build-gpucarry
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -E "^(PASS|FAIL)|memcheck|racecheck|RUN.SH|FAILED" "$OUT/runsh.txt" | grep -v "^PASS logprobs" | head -30
for r in 1 2; do
    $B/prev-test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/prev_$r.txt
    $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/new_$r.txt
done
{ for r in 1 2; do for v in new prev; do echo "-- $v, round $r"; cat /tmp/${v}_$r.txt; done; done; } > "$OUT/sample_timing.txt"
grep -E "^--|128256" "$OUT/sample_timing.txt"
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for chain in "--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0" "--temp 0.8"; do
for b in swiftinfer-prev swiftinfer; do for r in 1 2; do
  echo "llama3-8b q4_0 [$chain] $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 $chain 2>&1 >/dev/null | grep generation)"
done; done; done
} | tee "$OUT/run.txt"
