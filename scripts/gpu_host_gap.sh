#!/usr/bin/env bash
# scripts/gpu_host_gap.sh — how much of a batch-1 decode step the GPU waits for the host: tg128
# (`bench -p 0 -n 128`) and one request through the engine (`bench -c 1 -p 512 -n 128`) of each
# Llama-2-7B-shaped model of GAP_TYPES (default "q4_0 f16") under SI_CUDA_STEP_TIMING=1, whose
# line gives the GPU time a step (events around it), the host time in the call and the time from
# one step's start to the next's; the difference is what the host adds to each token. Then
# `run -n 256 --ignore-eos --seed 1` through the session and through the engine (--parallel 1,
# events polled), whose tokens/s differ by the engine's own host work.
# GAP_BINS="A B": each binary in turn (e.g. a base build against the change).
# usage (GPU machine, repository root, binaries carried): SI_BIN_DIR=build-gpucarry scripts/gpu_host_gap.sh
NAME=gap
. "$(dirname "$0")/gpu_7b_common.sh"
synth_7b ${GAP_TYPES:-q4_0 f16}
for round in 1 2; do
    for t in ${GAP_TYPES:-q4_0 f16}; do
        m=$MODELS/llama2-7b-$t.gguf
        for bin in ${GAP_BINS:-$BD/swiftinfer}; do
            echo "== round $round $t $bin tg128" | tee -a "$W/gap.txt"
            SI_CUDA_STEP_TIMING=1 timeout 100 "$bin" bench --device cuda --bw 4210 -m "$m" -p 0 \
                -n 128 -r 2 2>&1 | grep -E "step timing|tg128|error" | tee -a "$W/gap.txt"
            echo "== round $round $t $bin engine c1" | tee -a "$W/gap.txt"
            SI_CUDA_STEP_TIMING=1 timeout 100 "$bin" bench --device cuda -m "$m" -c 1 -p 512 \
                -n 128 2>&1 | grep -E "step timing|^\||error" | tee -a "$W/gap.txt"
            for par in "" "--parallel 1"; do
                echo "== round $round $t $bin run $par" | tee -a "$W/gap.txt"
                timeout 100 "$bin" run --device cuda -m "$m" -p 'Hello there' -n 256 --ignore-eos \
                    --seed 1 $par 2>&1 >/dev/null | grep -E "tokens/s|error" | tee -a "$W/gap.txt"
            done
        done
    done
    pack
done
log "gap: done"
