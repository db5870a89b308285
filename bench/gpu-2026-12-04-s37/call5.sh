#!/usr/bin/env bash
# s37 device call 5: the benchmark at the session's final code (issue 6's table: pp2048, tg128,
# 64 x (512 + 128) with f16 and fp8 KV; Llama-2-7B every type, Llama-3-8B F16 and Q4_0).
set -u
B=build-gpucarry
SI_COMMIT=61d5264 GPU_BENCH_LLAMA3=1 GPU_BENCH_PP_BATCH=2048 bench/gpu_bench.sh $B/swiftinfer $OUT/final \
    > "$OUT/gpu_bench.log" 2>&1
tail -30 "$OUT/gpu_bench.log"
