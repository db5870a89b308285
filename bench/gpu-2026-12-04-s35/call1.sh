#!/usr/bin/env bash
# s35 device call 1: the id-order draw (sampler.c + sample.cu) against s34's binaries.
# Expects build-gpucarry/ unpacked: swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so
# (the change) and swiftinfer-base, base-test_cuda_sample (HEAD e18d670's sampler sources).
set -u
B=build-gpucarry
mkdir -p "$OUT/k"
echo "== test_cuda_sample: base timings, then the change (checks + timings), twice"
for r in 1 2; do
    $B/base-test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA" > "$OUT/k/base_$r.txt"
    $B/test_cuda_sample > "$OUT/k/new_$r.txt" 2>&1
done
cat "$OUT/k/new_1.txt"; echo "-- base"; cat "$OUT/k/base_1.txt"
echo "== run.sh: test_cuda_sample with sanitizers and at every cluster size"
OUT=$OUT/k SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh 2>&1 | tail -25
echo "== run, Q4_0, session and engine, whole vocabulary (t 1, no top-k/p) and the default chain"
for sh in llama2-7b llama3-8b; do
    $B/swiftinfer synth -o /dev/shm/$sh.gguf --shape $sh --type q4_0 > /dev/null 2>&1
done
{
for sh in llama2-7b llama3-8b; do
  for chain in "--temp 1 --top-k 0 --top-p 1 --min-p 0" ""; do
    for b in swiftinfer-base swiftinfer; do for par in "" "--parallel 1"; do for r in 1 2; do
      echo "$sh [$chain] $b $par round $r: $($B/$b run --device cuda -m /dev/shm/$sh.gguf -p 'Hello there' \
          -n 256 --ignore-eos --seed 1 $chain $par 2>&1 >/dev/null | grep -E 't/s|tok/s|tokens/s' | tail -1)"
    done; done; done
  done
done
} | tee "$OUT/run.txt"
