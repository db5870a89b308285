#!/usr/bin/env bash
# Session 55, call 3 (binaries of build-gpucarry/COMMIT): the GLU GEMV hands its outputs over
# through one CTA barrier at the end (a warp a block quantises), instead of a shared-memory atomic
# count, which racecheck took for races (call 2: 48 hazards, in the GLU kernels only). Most
# important first: the fused checks (--small natively, then the full run's GLU lines: 7B / 8B /
# 2-5 blocks a CTA), the A/B again (SI_CUDA_GEMV_GLU=1 against =0, same binary, opposite
# orders), then the --small checks under memcheck and racecheck.
set -u
O=/tmp/o55c B=build-gpucarry
. bench/gpu_call_env.sh
timeout 60 $B/test_cuda_fused --small > $O/fused-small.txt 2>&1
step "test_cuda_fused --small rc=$?: $(grep -c '^FAIL' $O/fused-small.txt) FAIL, $(grep -c '^PASS gemv_norm_glu' $O/fused-small.txt) glu PASS, $(tail -1 $O/fused-small.txt)"
timeout 110 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused --no-bench rc=$? (124: cut off): $(grep -c '^FAIL' $O/fused.txt) FAIL, $(grep -c '^PASS gemv_norm_glu' $O/fused.txt) glu PASS, $(grep -c '^PASS gemv_norm_glu.* 28672x4096' $O/fused.txt) of them 8B"
grep '^FAIL' $O/fused*.txt | head
for t in q4_0 q8_0 q4_k; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
done
for r in r1 r2; do
    order="SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1"
    [ $r = r2 ] && order="SI_CUDA_GEMV_GLU=1 SI_CUDA_GEMV_GLU=0"
    for t in q4_0 q8_0 q4_k; do for e in $order; do tg128 $t $e $r; done; done
done
rm -f /dev/shm/llama2-7b-*.gguf
for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_fused --small > $O/san-$tool.txt 2>&1
    step "test_cuda_fused --small under $tool rc=$?: $(grep -c '^PASS gemv_norm_glu' $O/san-$tool.txt) glu PASS, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san-$tool.txt | tr '\n' ' ')"
done
step done
