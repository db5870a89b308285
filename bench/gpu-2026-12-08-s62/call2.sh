#!/usr/bin/env bash
# Session 62, call 2: issue 6's 7B benchmark at the session's head on whatever GPU comes
# (bench/gpu_bench.sh: Llama-2-7B-shaped Q4_0, pp2048, tg128, 64 requests of 512 + 128
# through the engine; no FP8 rerun), with the binaries of build-gpucarry/COMMIT (ef6e847: the
# head's GPU code; the head's CPU sampler skips an unused total, off this greedy path).
set -u
O=${O:-/tmp/o62b} B=build-gpucarry
. bench/gpu_call_env.sh
GPU_BENCH_TYPES="q4_0" GPU_BENCH_PP_BATCH=2048 GPU_BENCH_KV_FP8=0 \
    timeout 300 bench/gpu_bench.sh $B/swiftinfer $O/bench > $O/gpu_bench.log 2>&1
step "gpu_bench rc=$?"
cat $O/bench/summary.md 2>/dev/null
step done
