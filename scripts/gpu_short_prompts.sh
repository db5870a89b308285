#!/usr/bin/env bash
# scripts/gpu_short_prompts.sh — short prompts' prefill on the GPU (eager steps: decode steps are
# CUDA graphs, prefill is not, so host time per launch shows here), A/B of environment settings:
# pp of SP_LENGTHS (default 16,64,256) on the Llama-2-7B shape of SP_TYPES (default f16) under
# each SP_ENVS setting (default "SI_CUDA_ROWS64=0 SI_CUDA_ROWS64=1"), SP_ROUNDS rounds
# (default 2), alternating. Lines go to stdout and $OUT/sp/pp.txt.
#   SI_BIN_DIR=build-gpucarry scripts/gpu_short_prompts.sh
NAME=sp
. "$(dirname "$0")/gpu_7b_common.sh"

synth_7b ${SP_TYPES:-f16}
sp_one() { # round type model setting
    with_env "$4" timeout 100 "$BD/swiftinfer" bench --device cuda -m "$3" \
        -p "${SP_LENGTHS:-16,64,256}" -n 0 -r 3 2>&1 | grep -E "\| pp[0-9]+ |error" |
        sed "s|^|round $1 $2 $4: |" | tee -a "$W/pp.txt"
}
ab_rounds "${SP_ROUNDS:-2}" "${SP_TYPES:-f16}" "${SP_ENVS:-SI_CUDA_ROWS64=0 SI_CUDA_ROWS64=1}" sp_one
log "short prompts: done"
