#!/usr/bin/env bash
# s37 device call 3: a step's sampling parameters travel in the packed batch's one copy (no
# second host-to-device copy a sampled step), and the step ahead's id is sampled into the
# batch's token 0, which the fed step's copy skips (no device-to-device copy). `run` A/B
# against swiftinfer-42415f1 (the commit before): one sequence greedy and top-p 0.95 on
# Llama-2-7B Q4_0, Llama-3-8B Q4_0, SmolLM2-135M Q8_0; --parallel 8 at top-p 0.95 on
# Llama-3-8B; then the model part of run.sh.
set -u
B=build-gpucarry
MD=/tmp/si_models
mkdir -p $MD
$B/swiftinfer synth -o $MD/smollm2-q8_0.gguf --shape smollm2-135m --type q8_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
TOPP="--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0"
{
for m in /dev/shm/llama2-7b.gguf /dev/shm/llama3-8b.gguf $MD/smollm2-q8_0.gguf; do
for chain in "--greedy" "$TOPP"; do
for r in 1 2; do for b in swiftinfer-42415f1 swiftinfer; do
  echo "$(basename $m) [$chain] $b round $r: $($B/$b run --device cuda -m $m -p 'Hello there' \
      -n 256 --ignore-eos --seed 1 $chain 2>&1 >/dev/null | grep generation)"
done; done; done; done
for r in 1 2; do for b in swiftinfer-42415f1 swiftinfer; do
  echo "llama3-8b [top-p 0.95] --parallel 8 $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 $TOPP --parallel 8 2>&1 >/dev/null | grep 'tokens generated')"
done; done
} | tee "$OUT/run.txt"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | head -30
