#!/usr/bin/env bash
# s37 device call 2: the session's logits copied by the GPU straight into the backend's pinned
# buffer (logits_buffer), no host copy a token. tg128 A/B against swiftinfer-b54e9d7 (the step
# ahead, before this change) on Llama-2-7B Q4_0, Llama-3-8B Q4_0 and SmolLM2-135M Q8_0
# (synthetic), 3 rounds alternating; `run` greedy both ways; test_cuda_model on two models.
set -u
B=build-gpucarry
MD=/tmp/si_models
mkdir -p $MD
$B/swiftinfer synth -o $MD/smollm2-q8_0.gguf --shape smollm2-135m --type q8_0 > /dev/null 2>&1
$B/swiftinfer synth -o $MD/tiny-f16.gguf --shape tiny --type f16 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for r in 1 2 3; do for b in swiftinfer-b54e9d7 swiftinfer; do
  $B/$b bench --device cuda --bw 4210 -p 0 -n 128 -r 3 \
      -m /dev/shm/llama2-7b.gguf,/dev/shm/llama3-8b.gguf,$MD/smollm2-q8_0.gguf 2>/dev/null \
      | grep tg128 | sed "s/^/$b round $r: /"
done; done
for r in 1 2; do for b in swiftinfer-b54e9d7 swiftinfer; do
  echo "$b run llama2-7b greedy round $r: $($B/$b run --device cuda -m /dev/shm/llama2-7b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --greedy 2>&1 >/dev/null | grep generation)"
done; done
} | tee "$OUT/tg.txt"
for sp in smollm2-q8_0:5e-2 tiny-f16:1e-2; do
  $B/test_cuda_model $MD/${sp%:*}.gguf ${sp#*:} > "$OUT/test_cuda_model_${sp%:*}.log" 2>&1
  echo "test_cuda_model ${sp%:*}: rc=$? $(grep -c '^PASS' "$OUT/test_cuda_model_${sp%:*}.log") PASS, $(grep -c '^FAIL' "$OUT/test_cuda_model_${sp%:*}.log") FAIL"
done
