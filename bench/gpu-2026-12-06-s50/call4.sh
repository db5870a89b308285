#!/usr/bin/env bash
# Session 50, call 4: where one 16-column launch does not fit (Llama-2-7B's down projection,
# K = 11008, past 12 rows; Llama-3-8B's, K = 14336, at any 9-16 rows), two launches (the default:
# Q4_0 and Q5_K to 16 rows, the other types to 12) against the batched matmul
# (SI_CUDA_GEMV_SPLIT=0), in the engine: all-decoding t/s, requests of 512 + 128 tokens.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o4; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o4.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
for sp in llama2-7b:q4_0:12,13,16 llama3-8b:q4_0:9,12,16 llama2-7b:q5_k_m:13,16; do
    IFS=: read -r shape t cs <<< "$sp"
    m=/dev/shm/m-$shape-$t.gguf
    timeout 120 $B/swiftinfer synth -o $m --shape $shape --type $t > /dev/null 2>&1 || { step "synth $shape $t failed"; continue; }
    for cfg in "SI_NONE=0" "SI_CUDA_GEMV_SPLIT=0"; do
        f=$O/c-$shape-$t-$(echo $cfg | tr ' =' '_-').json
        env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c $cs -p 512 -n 128 --json > $f 2> ${f%.json}.err
        step "$shape $t [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
    done
    rm -f $m
done
step done
