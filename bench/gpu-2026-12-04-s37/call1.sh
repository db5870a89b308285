#!/usr/bin/env bash
# s37 device call 1: the session's step ahead (sample_begin / sample_end, SI_SESSION_AHEAD).
# `run` A/B, the same binary with SI_SESSION_AHEAD=0 and without, on SmolLM2-135M Q8_0, Llama-2-7B
# Q4_0 and Llama-3-8B Q4_0 (synthetic), greedy and top-p 0.95, 256 tokens, 2 rounds; the ids of
# both ways compared; then the model part of run.sh (test_cuda_model's session test among it).
set -u
B=build-gpucarry
MD=/tmp/si_models
mkdir -p $MD
$B/swiftinfer synth -o $MD/smollm2-q8_0.gguf --shape smollm2-135m --type q8_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for m in $MD/smollm2-q8_0.gguf /dev/shm/llama2-7b.gguf /dev/shm/llama3-8b.gguf; do
for chain in "--greedy" "--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0"; do
for r in 1 2; do for ahead in 0 1; do
  echo "$(basename $m) [$chain] SI_SESSION_AHEAD=$ahead round $r: $(SI_SESSION_AHEAD=$ahead \
      $B/swiftinfer run --device cuda -m $m -p 'Hello there' -n 256 --ignore-eos --seed 1 $chain \
      2>&1 >/dev/null | grep generation)"
done; done; done; done
for ahead in 0 1; do
  SI_SESSION_AHEAD=$ahead $B/swiftinfer run --device cuda -m /dev/shm/llama2-7b.gguf -p 'Hello there' \
      -n 200 --ignore-eos --seed 3 --temp 0.8 --print-ids 2>/dev/null | tail -1 > /tmp/ids_$ahead.txt
done
echo "ids with and without the step ahead (200 tokens, t 0.8, seed 3): $(cmp -s /tmp/ids_0.txt /tmp/ids_1.txt && echo identical || echo DIFFERENT) ($(wc -w < /tmp/ids_1.txt) ids)"
} | tee "$OUT/run.txt"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI|session sampling" "$OUT/runsh.txt" | head -30
