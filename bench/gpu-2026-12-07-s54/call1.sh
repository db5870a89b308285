#!/usr/bin/env bash
# Session 54, call 1 (one call may be all this session gets: most important first).
# A/B, same binary: the batch-1 gate/up GEMV (norm inside) ending in SwiGLU, writing the down
# GEMV's q8 x itself (cuda_gemv_norm_glu; opt-in: SI_CUDA_GEMV_GLU=1 it, =0 the GEMV then the
# SwiGLU kernel, the default; both named, so the A/B holds for binaries of either default). tg128 of Llama-2-7B Q4_0 (two rounds in opposite orders), the fused-kernel
# checks (the GLU GEMV against the GEMV + SwiGLU kernel, byte for byte, every quantised type),
# run.sh's model part (tiny models also with the GLU GEMV forced), the fused checks under the
# sanitizers, Q4_K / Q8_0 A/B, the GEMV checks, Llama-3-8B Q4_0 with the GLU forced (its dealing
# rule refuses it there).
set -u
O=/tmp/o54a B=build-gpucarry
. bench/gpu_call_env.sh
timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-q4_0.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
for e in SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1; do tg128 q4_0 $e r1; done
for e in SI_CUDA_GEMV_GLU=1 SI_CUDA_GEMV_GLU=0; do tg128 q4_0 $e r2; done
timeout 150 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused rc=$?: $(grep -c '^FAIL' $O/fused.txt) FAIL lines, $(grep -c 'gemv_norm_glu' $O/fused.txt) glu lines, $(tail -1 $O/fused.txt)"
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 OUT=$O/run timeout 220 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh model part rc=$?: $(grep -c PASS $O/runsh.txt) PASS, $(grep -c FAIL $O/runsh.txt) FAIL, $(tail -1 $O/runsh.txt)"
for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_fused --small > $O/san-$tool.txt 2>&1
    step "test_cuda_fused --small under $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|summary' $O/san-$tool.txt | tr '\n' ' ')"
done
for t in q4_k q8_0; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
    for e in SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1; do tg128 $t $e r1; done
    rm -f /dev/shm/llama2-7b-$t.gguf
done
timeout 100 $B/test_cuda_kernels --no-bench --gemv --types q4_0,q4_k,q8_0,q6_k > $O/kernels.txt 2>&1
step "test_cuda_kernels --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(tail -1 $O/kernels.txt)"
rm -f /dev/shm/llama2-7b-q4_0.gguf
timeout 90 $B/swiftinfer synth -o /dev/shm/llama3-8b-q4_0.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
for e in SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=2; do
    f=$O/tg8b-$e.txt
    env "$e" timeout 60 $B/swiftinfer bench --device cuda -m /dev/shm/llama3-8b-q4_0.gguf -p 0 -n 128 -r 3 > "$f" 2>&1
    step "llama3-8b q4_0 $e: $(grep -E 'tg128' "$f" | tr -s ' ' | tr '\n' ' ')"
done
step done
