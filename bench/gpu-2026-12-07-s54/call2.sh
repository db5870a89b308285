#!/usr/bin/env bash
# Session 54, call 2: call 1 cut down to what ~4 device minutes can hold (the rest of the
# session's budget went to failed starts): the engine on a tiny Q4_0 model with the GLU GEMV
# forced (whole-model logits GPU vs CPU, engine exactness), the fused-kernel checks (the GLU GEMV
# byte for byte against the GEMV + SwiGLU kernel), tg128 Llama-2-7B Q4_0 with and without the
# GLU GEMV (SI_CUDA_GEMV_GLU=1 / =0), two rounds in opposite orders.
set -u
O=/tmp/o54b B=build-gpucarry
. bench/gpu_call_env.sh
timeout 30 $B/swiftinfer synth -o /dev/shm/tiny-q4_0.gguf --shape tiny --type q4_0 > /dev/null 2>&1
SI_CUDA_GEMV_GLU=2 timeout 60 $B/test_cuda_model /dev/shm/tiny-q4_0.gguf 5e-2 > $O/model-tiny-glu.txt 2>&1
step "test_cuda_model tiny-q4_0 SI_CUDA_GEMV_GLU=2 rc=$?: $(grep -c PASS $O/model-tiny-glu.txt) PASS, $(grep -c FAIL $O/model-tiny-glu.txt) FAIL"
timeout 90 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused rc=$?: $(grep -c '^FAIL' $O/fused.txt) FAIL lines, $(grep -c '^PASS gemv_norm_glu' $O/fused.txt) glu PASS lines, $(tail -1 $O/fused.txt)"
timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-q4_0.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
for e in SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1; do tg128 q4_0 $e r1; done
for e in SI_CUDA_GEMV_GLU=1 SI_CUDA_GEMV_GLU=0; do tg128 q4_0 $e r2; done
step done
