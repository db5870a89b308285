#!/usr/bin/env bash
# scripts/gpu_concurrency_ab.sh — decode rate against concurrent requests under environment
# settings, in one device call (how the tensor-core F16 GEMV was judged, bench/RESULTS.md
# 2026-12-01 s14):
#   1. synthesise the Llama-2-7B-shaped models CA_TYPES (default "f16") into /dev/shm;
#   2. for each round (CA_ROUNDS, default 2), model, setting of CA_ENVS (default
#      "SI_CUDA_GEMV_H16_MMA=0 SI_CUDA_GEMV_H16_MMA=1"; "+" joins several assignments) and binary
#      of CA_BINS (default $SI_BIN_DIR/swiftinfer; e.g. this commit's and an older one's): tg128
#      of one request (-p 16 -n 128 -r 2), then `bench --concurrency C -p CA_PROMPT (128) -n 128`
#      for each C of CA_CONC (default "2 4 8"), alternating so that drift shows;
#   3. the lines into $W/engine-TYPE.txt, which bench/plot_concurrency.py draws.
# Logs under $OUT/concurrency/ (packed into $OUT/concurrency.tgz).
#
# usage (on the GPU machine, repository root, binaries prebuilt and carried):
#   SI_BIN_DIR=build-gpucarry scripts/gpu_concurrency_ab.sh
#   .venv/bin/python bench/plot_concurrency.py engine-f16.txt plot.png   # afterwards, here
NAME=concurrency
. "$(dirname "$0")/gpu_7b_common.sh"

DEV=${CA_DEVICE:-cuda}
synth_7b ${CA_TYPES:-f16}
ca_one() { # round type model setting
    local tg c row bin label
    for bin in ${CA_BINS:-$BD/swiftinfer}; do
        label="$4"
        [ -z "${CA_BINS:-}" ] || label="$4 $(basename "$bin")"
        tg=$(with_env "$4" timeout 100 "$bin" bench --device "$DEV" --bw 4210 -m "$3" \
            -p 16 -n 128 -r 2 2>&1 | grep -E "\| tg128 |error" || echo "(no tg line)")
        echo "r$1 $label tg: $tg" | tee -a "$W/engine-$2.txt"
        for c in ${CA_CONC:-2 4 8}; do
            row=$(with_env "$4" timeout 200 "$bin" bench --device "$DEV" -m "$3" -c "$c" \
                -p "${CA_PROMPT:-128}" -n 128 2>&1 | grep -E "gguf \||error" | tail -1)
            echo "r$1 $label c$c: ${row:-(no row)}" | tee -a "$W/engine-$2.txt"
        done
    done
}
ab_rounds "${CA_ROUNDS:-2}" "${CA_TYPES:-f16}" \
    "${CA_ENVS:-SI_CUDA_GEMV_H16_MMA=0 SI_CUDA_GEMV_H16_MMA=1}" ca_one
log "concurrency: done"
