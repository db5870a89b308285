#!/usr/bin/env bash
# s35 device call 3: the small top-k finish with its terms computed one thread each.
# build-gpucarry/: the change's swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so;
# swiftinfer-base, base-test_cuda_sample: HEAD e18d670's sampler sources.
set -u
B=build-gpucarry
for r in 1 2; do
    $B/base-test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA" > /tmp/base_$r.txt
    $B/test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/new_$r.txt
done
{ for r in 1 2; do echo "-- change, round $r"; cat /tmp/new_$r.txt; echo "-- base, round $r"; cat /tmp/base_$r.txt; done; } > "$OUT/sample_timing.txt"
grep -E "top-k 40|whole|TEST_CUDA" "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (sanitizers, cluster sizes)"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -vE "^timing" "$OUT/runsh.txt" | tail -30
for sh in llama2-7b llama3-8b; do
    $B/swiftinfer synth -o /dev/shm/$sh.gguf --shape $sh --type q4_0 > /dev/null 2>&1
done
{
for sh in llama3-8b llama2-7b; do for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "$sh default chain $b round $r: $($B/$b run --device cuda -m /dev/shm/$sh.gguf -p 'Hello there' \
      -n 256 --ignore-eos --seed 1 2>&1 >/dev/null | grep generation)"
done; done; done
} | tee "$OUT/run.txt"
