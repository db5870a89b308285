#!/usr/bin/env bash
# Session 59, call 2: tests/cuda/run.sh whole (its sanitizer runs included) on every binary of
# build-gpucarry/COMMIT, the ragged-row q8x GEMV's commit: its kernel tests (test_cuda_kernels'
# 9 x 576 and 7 x 352 small shapes, test_cuda_fused's norm and GLU GEMVs at K = 576) under
# memcheck and racecheck, and the model part on SmolLM2-135M-shaped models.
set -u
O=${O:-/tmp/o59b} B=build-gpucarry
. bench/gpu_call_env.sh
left=$((${CAP:-570} - ($(date +%s) - STEP_T0)))
SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
