#!/usr/bin/env bash
# s36 device call 1: the sampler's row passes issue their loads 8 at a time (smp_each).
# build-gpucarry/: the change's swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so;
# swiftinfer-base, base-test_cuda_sample: HEAD 07567ed's.
set -u
B=build-gpucarry
for r in 1 2; do
    $B/base-test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/base_$r.txt
    $B/test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/new_$r.txt
done
{ for r in 1 2; do echo "-- change, round $r"; cat /tmp/new_$r.txt; echo "-- base, round $r"; cat /tmp/base_$r.txt; done; } > "$OUT/sample_timing.txt"
grep -E "TEST_CUDA|FAIL" "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (sanitizers, cluster sizes)"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -vE "^timing" "$OUT/runsh.txt" | tail -24
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for chain in "--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0" "--temp 1 --top-k 0 --top-p 1 --min-p 0" "--temp 0"; do
for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "llama3-8b q4_0 [$chain] $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 $chain 2>&1 >/dev/null | grep generation)"
done; done; done
} | tee "$OUT/run.txt"
