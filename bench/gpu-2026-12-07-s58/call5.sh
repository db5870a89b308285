#!/usr/bin/env bash
# Session 58, call 5 — prepared, not run (no device time left): the next session's first call.
# Binaries: every one of the commit in build-gpucarry/COMMIT (session 58's final head). First the
# GEMV at SmolLM2-135M's QKV shape, 960 x 576, which test_cuda_kernels checks and times since
# 7822cd6 (the general f32-x kernel for the quantised types, gemv_h16 for F16/BF16); then
# tests/cuda/run.sh whole with its sanitizers (session 58 ran it with SI_SANITIZE=0 only), whose
# model part now has smollm2-q4_1 (the default model's type).
set -u
O=/tmp/o58e B=build-gpucarry
. bench/gpu_call_env.sh
timeout 120 $B/test_cuda_kernels --gemv --shape 960x576 > $O/k-960x576.txt 2>&1
step "test_cuda_kernels --gemv --shape 960x576 rc=$?: $(grep -c '^PASS' $O/k-960x576.txt) PASS, $(grep -c '^FAIL' $O/k-960x576.txt) FAIL, $(tail -1 $O/k-960x576.txt)"
left=$((570 - ($(date +%s) - STEP_T0)))
SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
