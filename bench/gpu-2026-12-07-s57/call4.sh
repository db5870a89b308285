#!/usr/bin/env bash
# Session 57, call 4: the general GEMV kernel (gemv.cu, f32 x: the quantised matrices whose K is no
# multiple of 128, SmolLM2-135M's 576) launched with PDL like the other decode kernels.
# Binaries: every one of 43c8e7a (build-gpucarry/COMMIT); si-old = swiftinfer of 244af1a. Most
# important first: the kernel's checks at the two shapes that take it (7 x 352, 3 x 16384) and
# memcheck / racecheck; whole-model logits GPU vs CPU on SmolLM2-135M-shaped models; tg128 old
# against new, two rounds in opposite orders; then tests/cuda/run.sh whole in what is left (its
# checks in the background beside the model part's logits tests since efb1f84: not yet run on a
# GPU).
set -u
O=${O:-/tmp/o57d} B=build-gpucarry
. bench/gpu_call_env.sh
for s in 7x352 3x16384; do
    timeout 60 $B/test_cuda_kernels --gemv --no-bench --shape $s > $O/k-$s.txt 2>&1
    step "test_cuda_kernels --gemv --shape $s rc=$?: $(grep -c '^PASS' $O/k-$s.txt) PASS, $(grep -c '^FAIL' $O/k-$s.txt) FAIL, $(tail -1 $O/k-$s.txt)"
done
for tool in memcheck racecheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --gemv --small \
        --shape 7x352 > $O/san-$tool.txt 2>&1
    step "$tool rc=$?: $(grep -c '^PASS' $O/san-$tool.txt) PASS, $(tail -1 $O/san-$tool.txt)"
done
for t in q4_0 q4_1 q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/smollm2-$t.gguf --shape smollm2-135m --type $t > /dev/null 2>&1
    timeout 60 $B/test_cuda_model /dev/shm/smollm2-$t.gguf 5e-2 > $O/model-$t.txt 2>&1
    step "test_cuda_model smollm2 $t rc=$?: $(grep -c '^PASS' $O/model-$t.txt) PASS, $(grep -c '^FAIL' $O/model-$t.txt) FAIL"
done
for r in 1 2; do
    for t in q4_0 q4_1 q8_0; do
        for bin in $([ $r = 1 ] && echo "si-old swiftinfer" || echo "swiftinfer si-old"); do
            timeout 30 $B/$bin bench --device cuda -m /dev/shm/smollm2-$t.gguf -p 0 -n 128 -r 3 \
                > $O/tg-$t-$bin-r$r.txt 2>&1
            step "r$r $t $bin: $(grep -E 'tg128' $O/tg-$t-$bin-r$r.txt | tr -s ' ')"
        done
    done
done
rm -f /dev/shm/*.gguf
# then run.sh, in what is left of CAP seconds (default 570). Session 58 ran this script cut to
# its device time (../gpu-2026-12-07-s58/call1.sh): CAP shorter, SI_SANITIZE=0 (run.sh without
# its sanitizer runs; the knobs' passes still make the pool beside the model part); MODEL_ONLY=1:
# run.sh's model part only (SI_SKIP_KERNEL_TESTS=1)
left=$((${CAP:-570} - ($(date +%s) - STEP_T0)))
SI_SKIP_KERNEL_TESTS=${MODEL_ONLY:-0} SI_SANITIZE=${SI_SANITIZE:-1} SI_COMMIT=43c8e7a SI_BIN_DIR=$B \
    OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh SI_SANITIZE=${SI_SANITIZE:-1} MODEL_ONLY=${MODEL_ONLY:-0} rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
