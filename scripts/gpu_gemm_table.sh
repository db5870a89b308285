#!/usr/bin/env bash
# scripts/gpu_gemm_table.sh — choose cuBLASLt configurations for the batched decode step's F16
# matmuls by measurement and see what they do to the engine, in one device call:
#   1. bench/kernels/gemm_algos --search for GT_ROWS rows (default 64): every configuration
#      cuBLASLt accepts for each Llama-2-7B weight shape, timed back to back in a graph; the
#      best of each shape into $OUT/gemm/table.txt (the engine's SI_CUDA_GEMM_TABLE format;
#      GT_SEARCH="--narrow" searches the narrow space, GT_BUDGET seconds a shape, default 60);
#   2. the 64 x (512 + 128) bench of GT_TYPES (default f16) with no table
#      (SI_CUDA_GEMM_TABLE=none), the built-in one and the new one, alternating GT_ROUNDS
#      (default 2) rounds (GT_TABLE=FILE skips step 1 and uses FILE).
# Logs under $OUT/gemm/ (packed into $OUT/gemm.tgz).
#
# usage (on the GPU machine, repository root, binaries prebuilt and carried):
#   SI_BIN_DIR=build-gpucarry scripts/gpu_gemm_table.sh
NAME=gemm
. "$(dirname "$0")/gpu_7b_common.sh"

table=${GT_TABLE:-$W/table.txt}
if [ -z "${GT_TABLE:-}" ]; then
    : > "$table"
    timeout 500 "$BD/gemm_algos" --search ${GT_SEARCH:-} --budget "${GT_BUDGET:-60}" \
        --table "$table" ${GT_ROWS:-64} > "$W/search.txt" 2> "$W/search.err"
    log "search rc=$?"
    cat "$W/search.txt" "$table"
    pack
fi
synth_7b ${GT_TYPES:-f16}
for round in $(seq "${GT_ROUNDS:-2}"); do
    for t in ${GT_TYPES:-f16}; do
        for tab in none "" "$table"; do
            r=$(SI_CUDA_GEMM_TABLE=$tab timeout 100 "$BD/swiftinfer" bench --device cuda \
                -m "$MODELS/llama2-7b-$t.gguf" -c 64 -p 512 -n 128 2>&1 |
                grep -E "\| *64 |error|SI_CUDA_GEMM")
            echo "round $round $t table=${tab:-built-in}: $r" | tee -a "$W/bench.txt"
        done
    done
    pack
done
log "gemm: done"
