#!/usr/bin/env bash
# scripts/gpu_gemv_sweep.sh — decode-GEMV tuning in one device call, for choosing the batch-1
# kernel settings from measurements rather than guesses:
#   1. synthesise Llama-2-7B-shaped models (SWEEP_TYPES, default "f16 q8_0 q4_0") into /dev/shm;
#   2. Nsight Compute (ncu, when present) on the first batch-1 GEMV of each SWEEP_NCU shape
#      (speed of light, occupancy, warp stalls, memory): where the kernel loses the bandwidth;
#   3. test_cuda_kernels --gemv timings (L2-flushed single launch, and back to back over weight
#      copies) under each knob setting of SWEEP_F16_KNOBS (F16) and SWEEP_Q_KNOBS (Q8_0, Q4_0);
#   4. tg128 of each 7B model under the same settings: what a decode step gains.
# Logs under $OUT/sweep/ (packed into $OUT/sweep.tgz), a summary on stdout.
#
# usage (on the GPU machine, repository root, binaries prebuilt and carried):
#   SI_BIN_DIR=build-gpucarry scripts/gpu_gemv_sweep.sh
NAME=sweep
. "$(dirname "$0")/gpu_7b_common.sh"
F16_KNOBS=${SWEEP_F16_KNOBS:-SI_CUDA_GEMV_H16=0,0 SI_CUDA_GEMV_H16=4,1 SI_CUDA_GEMV_H16=2,8}
Q_KNOBS=${SWEEP_Q_KNOBS:-SI_CUDA_GEMV_Q8X=0,0 SI_CUDA_GEMV_Q8X=2,2 SI_CUDA_GEMV_Q8X=2,3}
knobs_for() { if [ "$1" = f16 ] || [ "$1" = bf16 ]; then echo "$F16_KNOBS"; else echo "$Q_KNOBS"; fi; }

log "sweep: binaries in $BD, commit ${SI_COMMIT:-?}"
synth_7b ${SWEEP_TYPES:-f16 q8_0 q4_0}

if command -v ncu > /dev/null && [ "${SWEEP_NCU:-1}" != 0 ]; then
    for spec in ${SWEEP_NCU_SHAPES:-f16:4096x4096 f16:4096x11008 q8_0:4096x11008 q4_0:4096x11008 q4_0:4096x4096}; do
        t=${spec%%:*} s=${spec#*:}
        timeout 120 ncu --clock-control none -k regex:'gemv_(h16|q8x)_kernel' --launch-count 1 \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section SchedulerStats \
            "$BD/test_cuda_kernels" --gemv --no-bench --types "$t" --shape "$s" \
            > "$W/ncu-$t-$s.txt" 2>&1
        log "ncu $t $s rc=$?"
        grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Block Limit" \
            "$W/ncu-$t-$s.txt" | head -12
    done
    # the int8 tensor-core matmul at 64 batch rows (its 4th launch: nb = 9, 16, 33, 64)
    for spec in ${SWEEP_NCU_MMQ:-q4_0:4096x11008 q4_0:22016x4096}; do
        t=${spec%%:*} s=${spec#*:}
        timeout 120 ncu --clock-control none -k regex:'mmq_kernel' --launch-skip 3 --launch-count 1 \
            --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis \
            "$BD/test_cuda_kernels" --mmq --no-bench --types "$t" --shape "$s" \
            > "$W/ncu-mmq-$t-$s.txt" 2>&1
        log "ncu mmq $t $s rc=$?"
        grep -E "Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Grid Size|Block Size" \
            "$W/ncu-mmq-$t-$s.txt" | head -8
    done
    pack
fi

# where a decode step's time goes: every kernel of ~2 tokens (ncu runs them one at a time, caches
# flushed, so PDL overlap is gone: an upper bound per kernel), summed by kernel name
if command -v ncu > /dev/null && [ "${SWEEP_PROFILE:-1}" != 0 ]; then
    for t in ${SWEEP_PROFILE_TYPES:-f16 q4_0}; do
        m=$MODELS/llama2-7b-$t.gguf
        timeout 200 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
            --launch-skip "${SWEEP_PROFILE_SKIP:-4000}" --launch-count 600 \
            "$BD/swiftinfer" bench --device cuda -m "$m" -p 1 -n 64 -r 1 > "$W/profile-$t.csv" 2> "$W/profile-$t.err"
        log "profile $t rc=$?"
        python3 scripts/ncu_profile_sum.py "$W/profile-$t.csv" | tee "$W/profile-$t.txt"
    done
    pack
fi

for t in ${SWEEP_TYPES:-f16 q8_0 q4_0}; do
    for k in $(knobs_for "$t"); do
        env "$k" timeout 150 "$BD/test_cuda_kernels" --gemv --types "$t" > "$W/kern-$t-$(safe "$k").txt" 2>&1
        log "kernels $t $k rc=$?"
        grep -E "^gemv .*nb=1 " "$W/kern-$t-$(safe "$k").txt" | sed "s/  */ /g"
    done
    pack
done

for t in ${SWEEP_TYPES:-f16 q8_0 q4_0}; do
    m=$MODELS/llama2-7b-$t.gguf
    [ -f "$m" ] || continue
    for k in $(knobs_for "$t"); do
        echo "== llama2-7b-$t $k"
        env "$k" timeout 100 "$BD/swiftinfer" bench --device cuda --bw 4210 -m "$m" -p 16 -n 128 -r 3 \
            > "$W/tg-$t-$(safe "$k").txt" 2>&1
        grep -E "tg128|error" "$W/tg-$t-$(safe "$k").txt" || echo "(no tg line)"
    done
    pack
done
log "sweep: done"
