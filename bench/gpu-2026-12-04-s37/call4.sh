#!/usr/bin/env bash
# s37 device call 4: the sampler's two gathers into CTA 0 as one helper (smp_gather_to_first,
# smp_place; no change of arithmetic). run.sh's sampler part (exactness at every cluster size,
# memcheck, racecheck at 1 and 2 CTAs a row), the sampler's timings, and test_cuda_model on
# SmolLM2-135M Q8_0 (the engine's and the session's device sampling against the host's picks).
set -u
B=build-gpucarry
OUT=/tmp/rs SI_BIN_DIR=$B SI_KTESTS=test_cuda_sample SI_SKIP_MODEL=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
grep -E "^(FAIL)|memcheck|racecheck|RUN.SH|summary" "$OUT/runsh.txt" | head -30
$B/test_cuda_sample --time-only 2>&1 | grep -E "^timing" > "$OUT/sample_timing.txt"
grep -E "vocab 128256|vocab 32000" "$OUT/sample_timing.txt" | head -16
MD=/tmp/si_models; mkdir -p $MD
$B/swiftinfer synth -o $MD/smollm2-q8_0.gguf --shape smollm2-135m --type q8_0 > /dev/null 2>&1
$B/test_cuda_model $MD/smollm2-q8_0.gguf 5e-2 > "$OUT/test_cuda_model.log" 2>&1
echo "test_cuda_model smollm2-q8_0: rc=$? $(grep -c '^PASS' "$OUT/test_cuda_model.log") PASS, $(grep -c '^FAIL' "$OUT/test_cuda_model.log") FAIL"
