#!/usr/bin/env bash
# Session 49, call 7: steps of 9-16 rows as two GEMV launches (cuda_gemv_split_ok) and decode
# graphs of 1-16 rows bucketed exactly. In the order that matters if the call is cut off:
# test_cuda_kernels' GEMV checks (9, 12, 16 rows: every row bit for bit its 1-row run, and the
# double reference); test_cuda_attention (rows split by length up to 16); run.sh's model part; the engine at 8, 9, 12, 16 requests of 512 + 128
# tokens (all-decoding t/s), Llama-2-7B shape, Q4_0, Q4_K_M, Q5_K_M, Q3_K_M, three
# ways, same binary: SI_CUDA_GEMV_SPLIT=0 SI_CUDA_GRAPH_POW2=1 SI_CUDA_ATTN_SPLIT_ROWS=8 (the
# matmul, 9-15 rows padded to 16, attention rows of 9+ row steps one 1,024-key part: as before),
# SI_CUDA_GEMV_SPLIT=0 (the matmul; exact buckets, attention split by length up to 16 rows),
# the default (two GEMV launches too); Q4_0 and Q4_K_M also SI_CUDA_ATTN_SPLIT_ROWS=8 alone.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o7; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o7.tgz" --exclude="*.gguf" -C $O .; }
TYPES=q4_0,q4_k,q6_k,q3_k,q2_k,iq4_xs,q8_0
timeout 200 build-gpucarry/test_cuda_kernels --no-bench --gemv --types $TYPES > $O/kernels.txt 2>&1
step "test_cuda_kernels --no-bench --gemv rc=$?: $(grep -c '^FAIL' $O/kernels.txt) FAIL lines, $(grep -c 'same bits nb 1..16' $O/kernels.txt) 1..16 lines, $(tail -1 $O/kernels.txt)"
timeout 120 build-gpucarry/test_cuda_attention --no-bench > $O/attention.txt 2>&1
step "test_cuda_attention --no-bench rc=$?: $(grep -c '^FAIL' $O/attention.txt) FAIL lines, $(tail -1 $O/attention.txt)"
OUT=$O/model SI_BIN_DIR=build-gpucarry SI_SKIP_KERNEL_TESTS=1 timeout 200 tests/cuda/run.sh > $O/runsh-model.txt 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' $O/runsh-model.txt) PASS lines, $(grep -c 'FAIL' $O/runsh-model.txt) FAIL lines, $(tail -1 $O/runsh-model.txt)"
for t in q4_0 q4_k_m q5_k_m q3_k_m; do
    m=/dev/shm/m-$t.gguf
    timeout 120 build-gpucarry/swiftinfer synth -o $m --shape llama2-7b --type $t > /dev/null 2>&1 || { step "synth $t failed"; continue; }
    CFGS=("SI_CUDA_GEMV_SPLIT=0 SI_CUDA_GRAPH_POW2=1 SI_CUDA_ATTN_SPLIT_ROWS=8" "SI_CUDA_GEMV_SPLIT=0" "SI_NONE=0")
    case $t in q4_0|q4_k_m) CFGS+=("SI_CUDA_ATTN_SPLIT_ROWS=8");; esac
    for cfg in "${CFGS[@]}"; do
        f=$O/c-$t-$(echo $cfg | tr ' =' '_-').json
        env $cfg timeout 100 build-gpucarry/swiftinfer bench --device cuda -m $m -c 8,9,12,16 -p 512 -n 128 --json > $f 2> ${f%.json}.err
        step "$t [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}') | $(grep -o '[0-9]* step graphs captured, in [0-9.]* s' ${f%.json}.err | head -1)"
    done
    rm -f $m
done
step done
