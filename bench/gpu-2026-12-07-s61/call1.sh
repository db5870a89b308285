#!/usr/bin/env bash
# Session 61, call 1. Binaries: build-gpucarry/COMMIT.
# A. Why test_cuda_model's "sampling on the gpu (seeded)" fails on the SmolLM2-135M-shaped Q4_1
#    model's FP8 cache with gemv_direct (s60 call 4, an H100: 3/4 t 1.0 requests alike every time
#    under the defaults and SI_CUDA_GEMV_NORM=0, 4/4 under SI_CUDA_GEMV_DIRECT=0). The test now
#    runs t 1.0 on all 8 requests and, where a pair parts, prints where, whether each engine
#    repeats its ids, and whether the logprobs up to there agree (the same logits, two samplers)
#    or not (the logits differ).
# B. gemv_direct's looping instance (SI_CUDA_GEMV_DIRECT_LOOP=1 prefetch to L1, 2 to L2, 3 no
#    prefetch; 0 the default, a CTA a round): its checks at 8191 x 576 (more rounds than resident
#    CTAs) under each, the norm GEMV's (test_cuda_fused), memcheck and racecheck.
# C. its timings: test_cuda_kernels at 49152 x 576 (the tied logits) and tg128 of SmolLM2-135M-
#    shaped Q4_0 / Q4_1 / Q8_0 under 0 / 1 / 2, two rounds, the second reversed.
set -u
O=${O:-/tmp/o61a} B=build-gpucarry
. bench/gpu_call_env.sh
q32=q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl
for sp in smollm2-q4_1:smollm2-135m:q4_1:SI_NONE=0 smollm2-q4_1:smollm2-135m:q4_1:SI_CUDA_GEMV_DIRECT=0 \
          smollm2-q4_0:smollm2-135m:q4_0:SI_NONE=0 smollm2-q8_0:smollm2-135m:q8_0:SI_NONE=0 \
          tiny-q4_0:tiny:q4_0:SI_NONE=0; do
    IFS=: read -r name shape type e <<< "$sp"
    [ -f /dev/shm/$name.gguf ] || timeout 60 $B/swiftinfer synth -o /dev/shm/$name.gguf --shape $shape --type $type > /dev/null 2>&1
    f=$O/model-$name-$e.txt
    env $e timeout 90 $B/test_cuda_model /dev/shm/$name.gguf 5e-2 > $f 2>&1
    step "A $name $e rc=$?: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL: $(grep -E '^FAIL|^INFO   ' $f | cut -c1-240 | tr '\n' ' ')"
done
for l in 1 2 3; do
    f=$O/kernels-loop$l.txt
    SI_CUDA_GEMV_DIRECT_LOOP=$l timeout 60 stdbuf -oL $B/test_cuda_kernels --gemv --no-bench --shape 8191x576 --types $q32 > $f 2>&1
    step "B kernels 8191x576 loop $l rc=$?: $(tail -1 $f)"
done
f=$O/fused-loop1.txt
SI_CUDA_GEMV_DIRECT_LOOP=1 timeout 100 stdbuf -oL $B/test_cuda_fused --no-bench > $f 2>&1
step "B fused loop 1 rc=$?: $(grep -c '^FAIL' $f) FAIL, $(tail -1 $f)"
for tool in memcheck racecheck; do
    f=$O/kernels-loop1-$tool.txt
    SI_CUDA_GEMV_DIRECT_LOOP=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --gemv --no-bench --shape 8191x576 --types q4_0,q8_0 > $f 2>&1
    step "B $tool loop 1 rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $f | tr '\n' ' ') $(tail -1 $f)"
done
for l in 0 1 2 3; do
    f=$O/time-loop$l.txt
    SI_CUDA_GEMV_DIRECT_LOOP=$l timeout 60 stdbuf -oL $B/test_cuda_kernels --gemv --shape 49152x576 --types q4_0,q4_1,q8_0,f16 > $f 2>&1
    step "C 49152x576 loop $l: $(grep -E '49152' $f | grep -E 'read|nb=1 ' | cut -c1-100 | tr '\n' ' ')"
done
for t in q4_0 q4_1 q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-135m-$t.gguf --shape smollm2-135m --type $t > /dev/null 2>&1
done
for r in 1 2; do
    for t in q4_0 q4_1 q8_0; do
        for l in $([ $r = 1 ] && echo "0 1 2" || echo "2 1 0"); do
            tg128 $t SI_CUDA_GEMV_DIRECT_LOOP=$l r$r smollm2-135m
        done
    done
done
step done
