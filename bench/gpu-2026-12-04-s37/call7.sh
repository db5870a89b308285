#!/usr/bin/env bash
# s37 device call 7: the engine samples a step's host rows (penalties) on the model's thread
# pool, a row per thread at a time (every request has its own sampler). `run --parallel N
# --repeat-penalty 1.1` against swiftinfer-1e4930d on Llama-3-8B Q4_0 and Llama-2-7B Q4_0,
# N = 1, 8, 64, and the same without the penalty (device sampling) for scale; the model part of
# run.sh.
set -u
B=build-gpucarry
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for m in llama3-8b llama2-7b; do for par in 1 8 64; do for r in 1 2; do for b in swiftinfer-1e4930d swiftinfer; do
  echo "$m --parallel $par --repeat-penalty 1.1 $b round $r: $($B/$b run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --repeat-penalty 1.1 --parallel $par \
      --gpu-memory-fraction 0.5 2>&1 >/dev/null | grep 'tokens generated')"
done; done; done
  echo "$m --parallel 64 no penalty: $($B/swiftinfer run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --parallel 64 \
      --gpu-memory-fraction 0.5 2>&1 >/dev/null | grep 'tokens generated')"
done
} | tee "$OUT/run_penalty.txt"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | head -30
