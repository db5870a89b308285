#!/usr/bin/env bash
# s36 device call 4: one cluster barrier a reduction (block totals in alternating slots).
# build-gpucarry/: the change's swiftinfer, test_cuda_sample, test_cuda_model, libswiftinfer.so;
# prev-test_cuda_sample, swiftinfer-prev: 3ac995b's; base-*: 07567ed's (the session's start).
set -u
B=build-gpucarry
for r in 1 2; do
    $B/prev-test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/prev_$r.txt
    $B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > /tmp/new_$r.txt
done
{ for r in 1 2; do for v in new prev; do echo "-- $v, round $r"; cat /tmp/${v}_$r.txt; done; done; } > "$OUT/sample_timing.txt"
echo "== run.sh: test_cuda_sample (whole, sanitizers, cluster sizes 1 2 4 16) and the model part"
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|memcheck|racecheck|RUN.SH|PYAPI|div_to_float" "$OUT/runsh.txt" | head -30
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
{
for chain in "--temp 0.8 --top-k 0 --top-p 0.95 --min-p 0" "--temp 1 --top-k 0 --top-p 1 --min-p 0" "--temp 0.8"; do
for b in swiftinfer-prev swiftinfer swiftinfer-base; do for r in 1 2; do
  echo "llama3-8b q4_0 [$chain] $b round $r: $($B/$b run --device cuda -m /dev/shm/llama3-8b.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 $chain 2>&1 >/dev/null | grep generation)"
done; done; done
} | tee "$OUT/run.txt"
