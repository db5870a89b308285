#!/usr/bin/env bash
# s35 device call 5: the model part of run.sh with test_cuda_model's new whole-vocabulary checks;
# run --parallel 1/8/32 at t 1.0 alone (the OpenAI default), base against the change.
set -u
B=build-gpucarry
OUT=/tmp/m SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 SI_COMMIT=${SI_COMMIT:-} tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"; grep -E "^FAIL|RUN.SH|PYAPI|sampling on the gpu" "$OUT/runsh.txt" | head -12
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
{
for par in 1 8 32; do for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "llama2-7b q4_0 t 1.0 alone --parallel $par $b round $r: $($B/$b run --device cuda -m /dev/shm/llama2-7b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 --temp 1 --top-k 0 --top-p 1 --min-p 0 --parallel $par 2>&1 >/dev/null | grep 'tokens generated')"
done; done; done
} | tee "$OUT/run_parallel.txt"
