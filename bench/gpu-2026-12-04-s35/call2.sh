#!/usr/bin/env bash
# s35 device call 2: the id-order draw with the small top-k set ordered by id in its rank sort.
# build-gpucarry/: the change's swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so;
# swiftinfer-base, base-test_cuda_sample: HEAD e18d670's sampler sources.
set -u
B=build-gpucarry
for r in 1 2; do
    $B/base-test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA" > /tmp/base_$r.txt
    $B/test_cuda_sample 2>&1 | grep -E "^timing|TEST_CUDA|FAIL" > /tmp/new_$r.txt
done
{ for r in 1 2; do echo "-- change, round $r"; cat /tmp/new_$r.txt; echo "-- base, round $r"; cat /tmp/base_$r.txt; done; } > "$OUT/sample_timing.txt"
grep -E "top-k 40|whole|TEST_CUDA" "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (sanitizers, cluster sizes) and the model part"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -vE "^timing" "$OUT/runsh.txt" | tail -45
for sh in llama2-7b llama3-8b; do
    $B/swiftinfer synth -o /dev/shm/$sh.gguf --shape $sh --type q4_0 > /dev/null 2>&1
done
{
for sh in llama3-8b llama2-7b; do for b in swiftinfer-base swiftinfer; do for r in 1 2; do
  echo "$sh default chain $b round $r: $($B/$b run --device cuda -m /dev/shm/$sh.gguf -p 'Hello there' \
      -n 256 --ignore-eos --seed 1 2>&1 >/dev/null | tail -1)"
done; done; done
} | tee "$OUT/run.txt"
echo "== serve, Llama-2-7B Q4_0, OpenAI default sampling (t 1, top_p 1), base then change"
for b in swiftinfer-base swiftinfer; do
  python3 bench/serve.py --launch --binary $B/$b --model-file /dev/shm/llama2-7b.gguf --endpoint completions \
    --rates 10,40 --duration 15 --max-tokens 128 --temperature 1.0 --json "$OUT/serve-$b.json" 2>&1 | tail -6
done
