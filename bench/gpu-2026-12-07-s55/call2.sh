#!/usr/bin/env bash
# Session 55, call 2 (binaries of the commit in build-gpucarry/COMMIT: the GLU GEMV's test shapes
# fixed, n % 128 == 0, after call 1's test_cuda_fused stopped at n = 96, which the reference
# SwiGLU kernel's q8 output does not take). Most important first: more A/B rounds of the GLU GEMV
# (SI_CUDA_GEMV_GLU=1 against =0, same binary, opposite orders), the fused checks (the GLU GEMV
# against the GEMV + SwiGLU kernel, byte for byte, every quantised type), then the fused checks
# under compute-sanitizer's memcheck and racecheck.
set -u
O=/tmp/o55b B=build-gpucarry
. bench/gpu_call_env.sh
for t in q4_0 q8_0 q4_k; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
done
for r in r1 r2 r3; do
    order="SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1"
    [ $r = r2 ] && order="SI_CUDA_GEMV_GLU=1 SI_CUDA_GEMV_GLU=0"
    for t in q4_0 q8_0 q4_k; do for e in $order; do tg128 $t $e $r; done; done
done
rm -f /dev/shm/llama2-7b-*.gguf
timeout 200 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused rc=$?: $(grep -c '^FAIL' $O/fused.txt) FAIL lines, $(grep -c '^PASS gemv_norm_glu' $O/fused.txt) glu PASS lines, $(tail -1 $O/fused.txt)"
grep '^FAIL' $O/fused.txt | head -20
for tool in memcheck racecheck; do
    timeout 170 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_fused --small > $O/san-$tool.txt 2>&1
    step "test_cuda_fused --small under $tool rc=$?: $(grep -c '^PASS gemv_norm_glu' $O/san-$tool.txt) glu PASS, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san-$tool.txt | tr '\n' ' ') $(grep -v '^=' $O/san-$tool.txt | tail -1)"
done
step done
