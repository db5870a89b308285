#!/usr/bin/env bash
# Session 62, call 1. Binaries: build-gpucarry/COMMIT (the samplers' shared e^x, sampler_expf).
# A. test_cuda_sample: sampler_expf on the device against the host's, bit for bit; every row's
#    id against sampler_pick (min-p now adds the host's logf); its timings (the device's weights
#    now cost sampler_expf instead of CUDA's expf: compare with earlier runs' on the same GPU).
# B. test_cuda_model on the SmolLM2-135M-shaped Q4_1 model (session 61's boundary flip: request 3,
#    token 16, on the FP8 cache, every run), Q4_0 and Q8_0 and the tiny Q4_0: the t 1.0 check
#    must now find every pair alike ("0 more part at a cumulative boundary").
# C. tests/cuda/run.sh's model part (SI_SKIP_KERNEL_TESTS=1: every model, CLI smoke, Python API,
#    serve, bench) in CAP seconds (default 300).
# D. tg128 of the Llama-2-7B-shaped Q4_0 model (issue 6's batch-1 target), 3 repetitions; then
#    the gate/up GEMV ending in SwiGLU against the GEMV + SwiGLU kernel (SI_CUDA_GEMV_GLU=0), two
#    rounds: its rule was measured on H100s only (+1.8 %).
set -u
O=${O:-/tmp/o62a} B=build-gpucarry
. bench/gpu_call_env.sh
f=$O/sample.txt
timeout 150 stdbuf -oL $B/test_cuda_sample > $f 2>&1
step "A sample rc=$?: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL: $(grep -E '^FAIL|sampler_expf' $f | cut -c1-200 | tr '\n' ' ')"
for sp in smollm2-q4_1:smollm2-135m:q4_1 smollm2-q4_0:smollm2-135m:q4_0 \
          smollm2-q8_0:smollm2-135m:q8_0 tiny-q4_0:tiny:q4_0; do
    IFS=: read -r name shape type <<< "$sp"
    [ -f /dev/shm/$name.gguf ] || timeout 60 $B/swiftinfer synth -o /dev/shm/$name.gguf --shape $shape --type $type > /dev/null 2>&1
    f=$O/model-$name.txt
    timeout 90 $B/test_cuda_model /dev/shm/$name.gguf 5e-2 > $f 2>&1
    step "B $name rc=$?: $(grep -c '^PASS' $f) PASS, $(grep -c '^FAIL' $f) FAIL: $(grep -E '^FAIL|^INFO   |sampling on the gpu' $f | cut -c1-200 | tr '\n' ' ')"
done
SI_SKIP_KERNEL_TESTS=1 SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run \
    timeout ${CAP:-300} tests/cuda/run.sh > $O/runsh.txt 2>&1
step "C run.sh (model part) rc=$?: $(grep -E 'FAILED|^== ' $O/runsh.txt | tr '\n' ' '), $(tail -n 1 $O/runsh.txt)"
grep -h "sampling on the gpu (seeded)\|^INFO   request" $O/run/test_cuda_model.log | cut -c1-200
timeout 120 $B/swiftinfer synth -o /dev/shm/llama2-7b-q4_0.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
tg128 q4_0 SI_NONE=0 r1
ab llama2-7b q4_0 SI_NONE=0 SI_CUDA_GEMV_GLU=0 2
step done
