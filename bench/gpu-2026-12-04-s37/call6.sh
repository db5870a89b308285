#!/usr/bin/env bash
# s37 device call 6: the engine's logits in the CUDA backend's pinned rows (logits_buffer), so a
# step whose requests sample on the host (penalties) gets its rows by the device's copies, one a
# run of consecutive rows, and no host copy. `run --parallel N` with a repetition penalty (host
# sampling) against swiftinfer-61d5264 on Llama-3-8B Q4_0 and Llama-2-7B Q4_0, N = 1, 8, 64;
# then the model part of run.sh (the engine's exactness and host-sampling checks among it).
set -u
B=build-gpucarry
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for m in llama3-8b llama2-7b; do for par in 1 8 64; do for r in 1 2; do for b in swiftinfer-61d5264 swiftinfer; do
  echo "$m --parallel $par --repeat-penalty 1.1 $b round $r: $($B/$b run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --repeat-penalty 1.1 --parallel $par \
      --gpu-memory-fraction 0.5 2>&1 >/dev/null | grep 'tokens generated')"
done; done; done; done
} | tee "$OUT/run_penalty.txt"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | head -30
