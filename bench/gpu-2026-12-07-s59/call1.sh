#!/usr/bin/env bash
# Session 59, call 1: the q8x GEMV on ragged rows (K % 128 != 0: SmolLM2-135M's 576 for the types
# of 32-element blocks; gemv_q8x.cuh), which takes SmolLM2's QKV, output and gate/up matrices from
# the f32-x kernel to the q8x one with the norm inside and, for gate/up, the SwiGLU.
# Binaries: every one of build-gpucarry/COMMIT; si-old = swiftinfer of 176f225 (the f32-x kernel
# there). Most important first: the GEMV's checks at the ragged shapes and under memcheck /
# racecheck; the fused kernels' checks (the norm GEMV and the GLU GEMV at 576); whole-model logits
# GPU vs CPU on SmolLM2-135M-shaped models; tg128 old against new (two rounds, opposite orders),
# the GLU GEMV forced on (SI_CUDA_GEMV_GLU=2: its dealing rule refuses 1,536 outputs); Llama-2-7B
# Q4_0 old against new (its kernels gained a branch for the ragged tail); with CAP set, run.sh's
# model part in what is left (if a minute or more). Call 1 ran it on 9e6ce12 (hung in the norm
# GEMV at K = 576); call 2 (O=/tmp/o59b CAP=320) on the fix, bc2a4bb.
set -u
O=${O:-/tmp/o59a} B=build-gpucarry
. bench/gpu_call_env.sh
kcheck() { # name, then test_cuda_kernels' arguments
    local n=$1
    shift
    timeout 120 $B/test_cuda_kernels "$@" > $O/k-$n.txt 2>&1
    step "test_cuda_kernels $* rc=$?: $(grep -c '^PASS' $O/k-$n.txt) PASS, $(grep -c '^FAIL' $O/k-$n.txt) FAIL, $(tail -1 $O/k-$n.txt)"
}
kcheck 960x576 --gemv --no-bench --shape 960x576
kcheck 7x352 --gemv --no-bench --shape 7x352
kcheck small-9x576 --gemv --small --shape 9x576
for tool in memcheck racecheck; do
    for s in 9x576 7x352; do
        timeout 90 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --gemv \
            --small --shape $s > $O/san-$tool-$s.txt 2>&1
        step "$tool $s rc=$?: $(grep -c '^PASS' $O/san-$tool-$s.txt) PASS, $(tail -1 $O/san-$tool-$s.txt)"
    done
done
timeout 120 stdbuf -oL $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused --no-bench rc=$?: $(grep -c '^PASS' $O/fused.txt) PASS, $(grep -c '^FAIL' $O/fused.txt) FAIL, $(grep 576 $O/fused.txt | grep -c '^PASS') PASS at K = 576, $(tail -1 $O/fused.txt)"
for t in q4_0 q4_1 q8_0 f16; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-$t.gguf --shape smollm2-135m --type $t > /dev/null 2>&1
done
for t in q4_0 q4_1 q8_0; do
    timeout 60 $B/test_cuda_model /dev/shm/smollm2-$t.gguf 5e-2 > $O/model-$t.txt 2>&1
    step "test_cuda_model smollm2 $t rc=$?: $(grep -c '^PASS' $O/model-$t.txt) PASS, $(grep -c '^FAIL' $O/model-$t.txt) FAIL"
done
tgb() { # binary, type, tag, [env]
    env ${4:-SI_NONE=0} timeout 30 $B/$1 bench --device cuda -m /dev/shm/smollm2-$2.gguf -p 0 -n 128 -r 3 \
        > $O/tg-$2-$1-$3.txt 2>&1
    step "$3 $2 $1 ${4:-}: $(grep -E 'tg128' $O/tg-$2-$1-$3.txt | tr -s ' ')"
}
for r in 1 2; do
    for t in q4_0 q4_1 q8_0; do
        for bin in $([ $r = 1 ] && echo "si-old swiftinfer" || echo "swiftinfer si-old"); do
            tgb $bin $t r$r
        done
        tgb swiftinfer $t glu2-r$r SI_CUDA_GEMV_GLU=2
    done
done
tgb swiftinfer f16 r1
tgb si-old f16 r1
rm -f /dev/shm/*.gguf
timeout 120 $B/swiftinfer synth -o /dev/shm/llama2-7b-q4_0.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
for r in 1 2; do
    for bin in $([ $r = 1 ] && echo "si-old swiftinfer" || echo "swiftinfer si-old"); do
        timeout 60 $B/$bin bench --device cuda -m /dev/shm/llama2-7b-q4_0.gguf -p 0 -n 128 -r 3 > $O/tg7b-$bin-r$r.txt 2>&1
        step "7B q4_0 r$r $bin: $(grep -E 'GPU copy|tg128' $O/tg7b-$bin-r$r.txt | tr -s ' ' | tr '\n' ' ')"
    done
done
rm -f /dev/shm/*.gguf
kcheck timed-960x576 --gemv --shape 960x576
# then run.sh's model part (SI_SKIP_KERNEL_TESTS=1: logits GPU vs CPU on every model it
# synthesises, CLI smoke, Python API, serve, bench) in what is left of CAP seconds, if CAP is set
left=$((${CAP:-0} - ($(date +%s) - STEP_T0)))
if [ -n "${CAP:-}" ] && [ $left -gt 60 ]; then
    SI_SKIP_KERNEL_TESTS=1 SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run \
        timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
    step "run.sh model part rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
fi
step done
