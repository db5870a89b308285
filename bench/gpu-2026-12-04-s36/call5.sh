#!/usr/bin/env bash
# s36 device call 5: racecheck on the sampler's cluster paths (2 and 16 CTAs a row; run.sh's
# racecheck covers the one-CTA path only), and `run --parallel` at top-p 0.95 (the engine's
# batched device sampling), base 07567ed against 3631ca4.
set -u
B=build-gpucarry
for c in 2 16; do
  SI_CUDA_SAMPLE_CLUSTER=$c timeout 240 compute-sanitizer --tool racecheck --error-exitcode 3 \
      $B/test_cuda_sample --small > /tmp/race$c.log 2>&1
  echo "racecheck cluster $c: rc=$? $(tail -1 /tmp/race$c.log)"
  grep -E "^(PASS|FAIL)" /tmp/race$c.log | head -5
  cp /tmp/race$c.log "$OUT/"
done
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for par in 8 32; do for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "llama3-8b q4_0 top-p 0.95 --parallel $par $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 --temp 0.8 --top-k 0 --top-p 0.95 --min-p 0 --parallel $par 2>&1 >/dev/null | grep 'tokens generated')"
done; done; done
} | tee "$OUT/run_parallel.txt"
