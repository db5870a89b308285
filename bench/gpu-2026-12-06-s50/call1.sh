#!/usr/bin/env bash
# Session 50, call 1: 9-16-row decode matmuls as one 16-column launch of the tensor-core GEMV
# (gemv_q8x_tc.cuh NC = 2) where x fits in shared memory, else two launches as in s49. In the
# order that matters if the call is cut off: test_cuda_kernels' GEMV checks of every quantised
# type (9, 10, 12, 13, 16 rows bit for bit their 1-row runs; x rows 8-15 are rows 7-0);
# test_cuda_fused (the pre-quantised x of 1-16 rows); run.sh's model part (test_cuda_model's
# logits now also after a 13-token chunk); memcheck and racecheck over the small GEMV shapes of
# Q4_0, Q6_K (two mma's a block), Q2_K (x's half sums); then the engine at 8, 9, 12, 13, 16
# requests of 512 + 128 tokens (all-decoding t/s), Llama-2-7B shape, Q4_0 and Q4_K_M: the default
# (one launch) against SI_CUDA_GEMV_TC16=0 (two launches: s49's code).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o1; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o1.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
TYPES=q4_0,q4_1,q5_0,q5_1,iq4_nl,iq4_xs,q4_k,q5_k,q6_k,q3_k,q2_k,q8_0
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv > $O/gpu.txt 2>&1
timeout 240 $B/test_cuda_kernels --no-bench --gemv --types $TYPES > $O/kernels.txt 2>&1
step "test_cuda_kernels --no-bench --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(grep -c 'same bits nb 1..16' $O/kernels.txt) 1..16 lines, $(tail -1 $O/kernels.txt)"
timeout 120 $B/test_cuda_fused --no-bench > $O/fused.txt 2>&1
step "test_cuda_fused --no-bench rc=$?: $(grep -c '^FAIL' $O/fused.txt) FAIL, $(grep -c '^PASS gemv_pre.*nb=1[0-9]' $O/fused.txt) PASS gemv_pre nb 10-16, $(tail -1 $O/fused.txt)"
OUT=$O/model SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 200 tests/cuda/run.sh > $O/runsh-model.txt 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' $O/runsh-model.txt) PASS lines, $(grep -c 'FAIL' $O/runsh-model.txt) FAIL lines, $(tail -1 $O/runsh-model.txt)"
for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --small --gemv --no-bench --types q4_0,q6_k,q2_k > $O/san-$tool.txt 2>&1
    step "$tool test_cuda_kernels --small --gemv rc=$?: $(grep -c '^FAIL' $O/san-$tool.txt) FAIL, $(tail -1 $O/san-$tool.txt)"
done
for t in q4_0 q4_k_m; do
    m=/dev/shm/m-$t.gguf
    timeout 120 $B/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC16=0"; do
        f=$O/c-$t-$(echo $cfg | tr ' =' '_-').json
        env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c 8,9,12,13,16 -p 512 -n 128 --json > $f 2> ${f%.json}.err
        step "$t [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}') | $(grep -o '[0-9]* step graphs captured, in [0-9.]* s' ${f%.json}.err | head -1)"
    done
    rm -f $m
done
step done
