#!/usr/bin/env bash
# s35 device call 6: top-p's survivors finished in one CTA when at most 128 (peaked rows).
# build-gpucarry/: the change's swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so;
# base-test_cuda_sample: the same test with 0237bc8's sample.cu; swiftinfer-prev: 0237bc8's.
set -u
B=build-gpucarry
for r in 1 2; do
    $B/base-test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/base_$r.txt
    $B/test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/new_$r.txt
done
{ for r in 1 2; do echo "-- change, round $r"; cat /tmp/new_$r.txt; echo "-- base, round $r"; cat /tmp/base_$r.txt; done; } > "$OUT/sample_timing.txt"
grep -E "top-p|TEST_CUDA|FAIL" "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (sanitizers, cluster sizes) and the model part"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|RUN.SH|PYAPI|memcheck|racecheck|sample vocab" "$OUT/runsh.txt" | head -24
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for b in swiftinfer-prev swiftinfer; do for r in 1 2; do
  echo "llama3-8b q4_0 t 0.7 top-p 0.9 (flat rows) $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 --temp 0.7 --top-k 0 --top-p 0.9 --min-p 0 2>&1 >/dev/null | grep generation)"
done; done
} | tee "$OUT/run.txt"
