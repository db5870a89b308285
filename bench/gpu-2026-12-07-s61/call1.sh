#!/usr/bin/env bash
# Session 61, call 1: why test_cuda_model's "sampling on the gpu (seeded)" fails on the
# SmolLM2-135M-shaped Q4_1 model's FP8 cache with gemv_direct (s60 call 4, an H100: 3/4 t 1.0
# requests alike every time under the defaults and SI_CUDA_GEMV_NORM=0, 4/4 under
# SI_CUDA_GEMV_DIRECT=0). The test now runs t 1.0 on all 8 requests and, where a pair parts,
# prints where, whether each engine repeats its ids, and whether the logprobs up to there agree
# (the same logits, two samplers) or not (the logits differ). Every 32-element-block model of
# run.sh, and F16, under the defaults and SI_CUDA_GEMV_DIRECT=0.
set -u
O=${O:-/tmp/o61a} B=build-gpucarry
. bench/gpu_call_env.sh
for sp in smollm2-q4_1:smollm2-135m:q4_1 smollm2-q4_0:smollm2-135m:q4_0 smollm2-q8_0:smollm2-135m:q8_0 \
          smollm2-f16:smollm2-135m:f16 tiny-q4_0:tiny:q4_0 tiny-q4_1:tiny:q4_1 tiny-q8_0:tiny:q8_0 \
          tiny-q5_0:tiny:q5_0 tiny-iq4_nl:tiny:iq4_nl; do
    IFS=: read -r name shape type <<< "$sp"
    timeout 60 $B/swiftinfer synth -o /dev/shm/$name.gguf --shape $shape --type $type > /dev/null 2>&1
    for e in SI_NONE=0 SI_CUDA_GEMV_DIRECT=0; do
        f=$O/model-$name-$e.txt
        env $e timeout 90 $B/test_cuda_model /dev/shm/$name.gguf 5e-2 > $f 2>&1
        step "$name $e rc=$?: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL: $(grep -E '^FAIL|^INFO   ' $f | cut -c1-220 | tr '\n' ' ')"
    done
done
step done
