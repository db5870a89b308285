#!/usr/bin/env bash
# Session 57, call 2 (call 1 was ../gpu-2026-12-07-s56/call3.sh: run.sh whole did not fit its
# 516 s, cut inside the knob passes, the model part not reached). tests/cuda/run.sh whole with its
# checks (sanitizers, knob passes) in parallel, 8 at a time on the device's 16 CPUs, every binary
# of 244af1a (build-gpucarry/COMMIT): does it fit one call now, and does everything pass at the
# final head. Then, in what is left, tg128 Llama-2-7B Q4_0 (the batch-1 shape).
set -u
O=/tmp/o57b B=build-gpucarry
. bench/gpu_call_env.sh
SI_COMMIT=244af1a SI_BIN_DIR=$B OUT=$O/run timeout 520 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep -c FAIL $O/runsh.txt) FAIL lines, $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
[ $(($(date +%s) - STEP_T0)) -lt 530 ] && ab llama2-7b q4_0 SI_NONE=0 SI_CUDA_GEMV_GLU=0 1
step done
