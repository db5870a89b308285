#!/usr/bin/env bash
# s36 device call 8: the model part of run.sh (every model's logits against the CPU, engine
# exactness, device sampling against the host's picks, streaming, FP8, CLI, Python API) on
# 687f7fe's binaries (the final sampler).
set -u
B=build-gpucarry
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | head -20
