#!/usr/bin/env bash
# Session 60, call 1: gemv_direct.cuh, the f32-x GEMV of the 32-element-block types that decodes
# each lane's units straight from global memory (no shared-memory staging), on the rows the q8x
# kernels do not take (K % 128 != 0: SmolLM2-135M's 576), and its batch-1 variant with the norm
# inside (cuda_gemv_norm). Binaries: every one of build-gpucarry/COMMIT; in the same binary
# SI_CUDA_GEMV_NORM=0 keeps the norm kernel before it and SI_CUDA_GEMV_DIRECT=0 gives the general
# kernel (and the norm kernel) again. Most important first: the GEMV's checks at the ragged shapes
# (960 x 576 QKV, 49152 x 576 tied logits, 7 x 352), both kernels; the norm GEMV's (test_cuda_fused);
# both under memcheck / racecheck; whole-model logits GPU vs CPU on SmolLM2-135M-shaped models;
# tg128 of the three settings (two rounds, the second in reverse order); the GEMV timings of both
# kernels at 960 x 576 and 49152 x 576.
set -u
O=${O:-/tmp/o60a} B=build-gpucarry
. bench/gpu_call_env.sh
Q32=q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl
kcheck() { # name, environment (NAME=VALUE), then test_cuda_kernels' arguments
    local n=$1 e=$2
    shift 2
    env "$e" timeout 120 stdbuf -oL $B/test_cuda_kernels "$@" > $O/k-$n.txt 2>&1
    step "$e test_cuda_kernels $* rc=$?: $(grep -c '^PASS' $O/k-$n.txt) PASS, $(grep -c '^FAIL' $O/k-$n.txt) FAIL, $(tail -1 $O/k-$n.txt)"
}
for s in 960x576 49152x576 7x352; do
    kcheck direct-$s SI_NONE=0 --gemv --no-bench --types $Q32 --shape $s
done
kcheck general-960x576 SI_CUDA_GEMV_DIRECT=0 --gemv --no-bench --types $Q32 --shape 960x576
timeout 120 stdbuf -oL $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused --no-bench rc=$?: $(grep -c '^PASS' $O/fused.txt) PASS, $(grep -c '^FAIL' $O/fused.txt) FAIL, $(grep -E 'x(576|352|2080)' $O/fused.txt | grep -c '^PASS') PASS at K = 352 / 576 / 2080, $(tail -1 $O/fused.txt)"
for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --gemv \
        --small --types $Q32 > $O/san-$tool.txt 2>&1
    step "$tool kernels --small rc=$?: $(grep -c '^PASS' $O/san-$tool.txt) PASS, $(tail -1 $O/san-$tool.txt)"
    timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_fused --small \
        > $O/san-fused-$tool.txt 2>&1
    step "$tool fused --small rc=$?: $(grep -c '^PASS' $O/san-fused-$tool.txt) PASS, $(tail -1 $O/san-fused-$tool.txt)"
done
for t in q4_0 q4_1 q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-135m-$t.gguf --shape smollm2-135m --type $t > /dev/null 2>&1
    timeout 60 $B/test_cuda_model /dev/shm/smollm2-135m-$t.gguf 5e-2 > $O/model-$t.txt 2>&1
    step "test_cuda_model smollm2 $t rc=$?: $(grep -c '^PASS' $O/model-$t.txt) PASS, $(grep -c '^FAIL' $O/model-$t.txt) FAIL"
done
for r in 1 2; do
    for t in q4_0 q4_1 q8_0; do
        for e in $([ $r = 1 ] && echo "SI_CUDA_GEMV_DIRECT=0 SI_CUDA_GEMV_NORM=0 SI_NONE=0" ||
            echo "SI_NONE=0 SI_CUDA_GEMV_NORM=0 SI_CUDA_GEMV_DIRECT=0"); do
            tg128 $t $e r$r smollm2-135m
        done
    done
done
timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-135m-f16.gguf --shape smollm2-135m --type f16 > /dev/null 2>&1
tg128 f16 SI_NONE=0 r1 smollm2-135m
rm -f /dev/shm/*.gguf
for s in 960x576 49152x576; do
    kcheck timed-direct-$s SI_NONE=0 --gemv --types q4_0,q4_1,q8_0,f16 --shape $s
    kcheck timed-general-$s SI_CUDA_GEMV_DIRECT=0 --gemv --types q4_0,q4_1,q8_0 --shape $s
done
step done
