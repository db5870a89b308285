#!/usr/bin/env bash
# Session 53, call 1: what session 52 left unrun on its binaries (e66eac3, the kernel code of the
# head): test_cuda_fused with the 10-row scales at every 9-10-row launch (SI_CUDA_GEMV_TC_COMPACT=1:
# the kernel with x quantised ahead by the norm / SwiGLU, the engine's path, bit for bit against
# the f32-x GEMV), then run.sh's model part (whole-model logits GPU vs CPU, engine exactness, CLI,
# Python API, serve, bench), then tg128 Llama-2-7B Q4_0 with its copy bandwidth.
set -u
O=/tmp/o1 B=build-gpucarry
. bench/gpu_call_env.sh
SI_CUDA_GEMV_TC_COMPACT=1 timeout 150 $B/test_cuda_fused --no-bench > $O/fused-compact.txt 2>&1
step "test_cuda_fused (compact) rc=$?: $(grep -c '^FAIL' $O/fused-compact.txt) FAIL lines, $(tail -1 $O/fused-compact.txt)"
SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 OUT=$O/run timeout 240 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh model part rc=$?: $(grep -c PASS $O/runsh.txt) PASS, $(grep -c FAIL $O/runsh.txt) FAIL, $(tail -1 $O/runsh.txt)"
m=/dev/shm/llama2-7b-q4_0.gguf
timeout 60 $B/swiftinfer synth -o $m --shape llama2-7b --type q4_0 > /dev/null 2>&1
timeout 60 $B/swiftinfer bench --device cuda -m $m -p 0 -n 128 -r 3 > $O/tg.txt 2>&1
step "tg128 rc=$?: $(grep -E 'GPU copy|tg128' $O/tg.txt | tr '\n' ' ')"
step done
