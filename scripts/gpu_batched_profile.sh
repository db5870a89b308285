#!/usr/bin/env bash
# scripts/gpu_batched_profile.sh — where a batched decode step's time goes (64 sequences of
# 512 + 128 tokens, the issue's batched case), in one device call:
#   1. synthesise the Llama-2-7B-shaped models BP_TYPES (default "f16 q4_0") into /dev/shm;
#   2. bench -c 64 -p 512 -n 128 under SI_CUDA_STEP_TIMING=1: the mean GPU time of a batched
#      decode step and the host time inside the backend call, against the bench's all-decoding
#      rate (64 tokens a step), say how long the GPU idles between steps;
#   3. for each setting of BP_ENVS (e.g. SI_CUDA_SKIP masks, scripts/ingraph_costs.py's), the
#      same bench's table line, for BP_ENV_TYPES (default "f16"), into envs.txt;
#   4. with ncu (BP_PROFILE_TYPES, default "f16"): BP_COUNT kernels (default 600, two steps) of
#      the all-decoding window, each timed alone, summed by name (scripts/ncu_profile_sum.py).
# Logs under $OUT/batched/ (packed into $OUT/batched.tgz).
#
# usage (on the GPU machine, repository root, binaries prebuilt and carried):
#   SI_BIN_DIR=build-gpucarry scripts/gpu_batched_profile.sh
NAME=batched
. "$(dirname "$0")/gpu_7b_common.sh"

synth_7b ${BP_TYPES:-f16 q4_0}
for t in ${BP_TYPES:-f16 q4_0}; do
    m=$MODELS/llama2-7b-$t.gguf
    for kv in f16 ${BP_KV:-}; do
        SI_CUDA_STEP_TIMING=1 timeout 200 "$BD/swiftinfer" bench --device cuda -m "$m" -c 64 \
            -p 512 -n 128 --kv-cache-dtype "$kv" > "$W/steps-$t-$kv.txt" 2>&1
        log "steps $t kv $kv rc=$?"
        grep -E "step timing|\| *64 " "$W/steps-$t-$kv.txt"
    done
    pack
done
for t in ${BP_ENV_TYPES:-f16}; do
    for e in ${BP_ENVS:-}; do
        r=$(with_env "$e" timeout 100 "$BD/swiftinfer" bench --device cuda \
            -m "$MODELS/llama2-7b-$t.gguf" -c 64 -p 512 -n 128 2>&1 | grep -E "\| *64 |error")
        echo "$t $e: $r" | tee -a "$W/envs.txt"
    done
done
pack
# kernels before the all-decoding window: BP_SKIP_<TYPE> (e.g. BP_SKIP_Q4_0), else BP_SKIP
skip_for() {
    local v="BP_SKIP_$(echo "$1" | tr a-z A-Z)"
    echo "${!v:-${BP_SKIP:-36000}}"
}
if command -v ncu > /dev/null; then
    for t in ${BP_PROFILE_TYPES:-f16}; do
        f=$W/profile-$t
        timeout 280 ncu --clock-control none --csv \
            --metrics gpu__time_duration.sum,dram__bytes_read.sum \
            --launch-skip "$(skip_for "$t")" --launch-count "${BP_COUNT:-600}" \
            "$BD/swiftinfer" bench --device cuda -m "$MODELS/llama2-7b-$t.gguf" -c 64 -p 512 \
            -n 128 > "$f.csv" 2> "$f.err"
        log "profile $t rc=$?"
        python3 scripts/ncu_profile_sum.py "$f.csv" --sequence "${BP_SEQ:-24}" | tee "$f.txt"
        rm -f "$f.csv"
        pack
    done
fi
log "batched: done"
