#!/usr/bin/env bash
# Session 60, call 3 (the one-call plan, when device time allowed one call only): tg128 of the three
# settings on SmolLM2-135M-shaped Q4_0 / Q4_1 / Q8_0 (default: gemv_direct with the norm inside;
# SI_CUDA_GEMV_NORM=0: gemv_direct after the norm kernel; SI_CUDA_GEMV_DIRECT=0: the general
# kernel, as before this session), two rounds, the second in reverse order; then
# tests/cuda/run.sh whole (every kernel test and its sanitizers, the model part) in what is left
# of CAP seconds (default 560). Binaries: every one of build-gpucarry/COMMIT.
set -u
O=${O:-/tmp/o60c} B=build-gpucarry
. bench/gpu_call_env.sh
for t in q4_0 q4_1 q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-135m-$t.gguf --shape smollm2-135m --type $t > /dev/null 2>&1
done
for r in 1 2; do
    for t in q4_0 q4_1 q8_0; do
        for e in $([ $r = 1 ] && echo "SI_CUDA_GEMV_DIRECT=0 SI_CUDA_GEMV_NORM=0 SI_NONE=0" ||
            echo "SI_NONE=0 SI_CUDA_GEMV_NORM=0 SI_CUDA_GEMV_DIRECT=0"); do
            tg128 $t $e r$r smollm2-135m
        done
    done
done
rm -f /dev/shm/*.gguf
left=$((${CAP:-560} - ($(date +%s) - STEP_T0)))
SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
