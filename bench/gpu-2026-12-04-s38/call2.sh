#!/usr/bin/env bash
# s38 device call 2: penalties on the GPU against the host path they replace.
# `run --parallel N --repeat-penalty 1.1` (t 0.8, seed 1, 128 tokens) on Llama-3-8B Q4_0 and
# Llama-2-7B Q4_0, N = 1, 8, 64, with SI_DEVICE_PENALTIES=0 (the host samples them: s37's path)
# and without (the device applies them), 2 rounds, and 64 requests without a penalty for
# scale; the generated texts of the two paths compared (md5 of stdout); then the model part of
# run.sh again (the fixed fallback check).
set -u
B=build-gpucarry
S=$(date +%s)
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
mkdir -p /tmp/txt
{
for m in llama3-8b llama2-7b; do for par in 1 8 64; do for r in 1 2; do for dp in 0 1; do
  echo "$m --parallel $par --repeat-penalty 1.1 SI_DEVICE_PENALTIES=$dp round $r: $(SI_DEVICE_PENALTIES=$dp $B/swiftinfer run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --repeat-penalty 1.1 --parallel $par \
      --gpu-memory-fraction 0.5 2>&1 >/tmp/txt/$m-$par-$r-$dp.txt | grep 'tokens generated')"
done; echo "  texts: $(md5sum < /tmp/txt/$m-$par-$r-0.txt | cut -c1-12) (host) $(md5sum < /tmp/txt/$m-$par-$r-1.txt | cut -c1-12) (device), $(wc -c < /tmp/txt/$m-$par-$r-1.txt) bytes"
done; done
  echo "$m --parallel 64 no penalty: $($B/swiftinfer run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --parallel 64 \
      --gpu-memory-fraction 0.5 2>&1 >/dev/null | grep 'tokens generated')"
done
} | tee "$OUT/run_penalty.txt"
echo "bench part: $(( $(date +%s) - S )) s"
rm -f /dev/shm/llama*.gguf
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 300 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "run.sh rc=$? after $(( $(date +%s) - S )) s"
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | cut -c1-300 | head -20
grep -h "penalties on the gpu" /tmp/rs/test_cuda_model.log | cut -c1-60,230-420
cp /tmp/rs/test_cuda_model.log "$OUT/"
