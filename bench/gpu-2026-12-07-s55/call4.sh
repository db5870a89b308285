#!/usr/bin/env bash
# For the next device session (not run in session 55: its device time was spent). Binaries of the
# final head in build-gpucarry (see COMMIT there). Most important first: run.sh whole (every
# kernel test, the sanitizers, whole-model logits with the GLU GEMV now on by default at 7B shapes
# and forced on the tiny ones, engine exactness, smoke, Python API, serve, bench), then the GLU
# A/B on whatever card comes (an H200's numbers are the ones issue 6's targets name).
set -u
O=/tmp/o56a B=build-gpucarry
. bench/gpu_call_env.sh
for t in q4_0 q4_k; do
    timeout 60 $B/swiftinfer synth -o /dev/shm/llama2-7b-$t.gguf --shape llama2-7b --type $t > /dev/null 2>&1
done
for r in r1 r2; do
    order="SI_CUDA_GEMV_GLU=0 SI_CUDA_GEMV_GLU=1"
    [ $r = r2 ] && order="SI_CUDA_GEMV_GLU=1 SI_CUDA_GEMV_GLU=0"
    for t in q4_0 q4_k; do for e in $order; do tg128 $t $e $r; done; done
done
rm -f /dev/shm/llama2-7b-*.gguf
SI_BIN_DIR=$B OUT=$O/run timeout 480 tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep -c PASS $O/runsh.txt) PASS, $(grep -c FAIL $O/runsh.txt) FAIL, $(tail -1 $O/runsh.txt)"
step done
