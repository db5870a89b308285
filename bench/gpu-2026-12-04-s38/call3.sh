#!/usr/bin/env bash
# s38 device call 3: logit biases with the penalties on the GPU (penalty.cu).
# test_cuda_sample whole without timings (biases and penalties bit for bit against the CPU at
# 32000 and 128256), memcheck on --small (no shared memory in the new kernel: no race check);
# then the model part of run.sh (test_cuda_model's device-vs-host checks with biases on every model).
set -u
B=build-gpucarry
S=$(date +%s)
timeout 120 $B/test_cuda_sample --no-bench > "$OUT/sample.txt" 2>&1; echo "test_cuda_sample rc=$?" | tee -a "$OUT/sample.txt"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_sample --small > "$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?" | tee -a "$OUT/memcheck.txt"
grep -E "^(PASS|FAIL)|TEST_CUDA|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sample.txt" "$OUT/memcheck.txt" | cut -c1-250
echo "kernel part: $(( $(date +%s) - S )) s"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 420 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "run.sh rc=$? after $(( $(date +%s) - S )) s"
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | cut -c1-300 | head -20
grep -hE "penalties on the gpu|logit biases" /tmp/rs/test_cuda_model.log | cut -c1-330 | sort | uniq -c
tar cf "$OUT/rs.tar" -C /tmp/rs . 2>/dev/null
