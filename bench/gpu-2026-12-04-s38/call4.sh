#!/usr/bin/env bash
# s38 device call 4: the model part of run.sh on the session's final code (serve_gpu.py now sends
# logit_bias and penalties through the server and reads /metrics).
set -u
B=build-gpucarry
S=$(date +%s)
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 420 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "run.sh rc=$? after $(( $(date +%s) - S )) s"
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI|logit_bias" "$OUT/runsh.txt" | cut -c1-300 | head -20
grep -rh "logit_bias" /tmp/rs/*.log | cut -c1-300 | head -5
cp /tmp/rs/test_cuda_model.log "$OUT/"; cp /tmp/rs/run_smoke*.log "$OUT/" 2>/dev/null
