#!/usr/bin/env bash
# scripts/gpu_decode_ab.sh — batch-1 decode A/B of environment settings in one device call, for
# deciding a default from measurements on the same machine and run:
#   1. synthesise the Llama-2-7B-shaped models AB_TYPES (default "f16 q4_0 q8_0") into /dev/shm;
#   2. with ncu (AB_PROFILE_TYPES, default "f16"): ~600 decode kernels under each of
#      AB_PROFILE_ENVS, each kernel timed alone, summed by name, and one layer's kernels in
#      launch order (scripts/ncu_profile_sum.py);
#   3. pp16 and tg128 (-p 16 -n 128 -r 2) of each model with each binary of AB_BINS (default
#      $SI_BIN_DIR/swiftinfer; e.g. this commit's and an older one's, both carried) under each
#      AB_ENVS setting (default "SI_CUDA_PDL=0 SI_CUDA_PDL=1"; one setting may join several
#      assignments with "+": "A=1+B=2"), all of them AB_ROUNDS times
#      (default 2), alternating, so that drift shows (settings, then binaries, innermost).
# Logs under $OUT/ab/ (packed into $OUT/ab.tgz), the tg lines on stdout. With SI_CUDA_SKIP masks
# as the settings, scripts/ingraph_costs.py turns tg.txt into what each kernel costs in the graph.
#
# usage (on the GPU machine, repository root, binaries prebuilt and carried):
#   SI_BIN_DIR=build-gpucarry AB_ENVS="A=0 A=1" scripts/gpu_decode_ab.sh
#   SI_BIN_DIR=build-gpucarry AB_ENVS=X=0 AB_BINS="build-gpucarry/old build-gpucarry/swiftinfer" \
#     scripts/gpu_decode_ab.sh
NAME=ab
. "$(dirname "$0")/gpu_7b_common.sh"

synth_7b ${AB_TYPES:-f16 q4_0 q8_0}

if command -v ncu > /dev/null; then
    for t in ${AB_PROFILE_TYPES:-f16}; do
        for e in ${AB_PROFILE_ENVS:-}; do
            f=$W/profile-$t-$(safe "$e")
            with_env "$e" timeout 200 ncu --clock-control none --csv \
                --metrics gpu__time_duration.sum,dram__bytes_read.sum \
                --launch-skip "${AB_PROFILE_SKIP:-4000}" --launch-count 600 \
                "$BD/swiftinfer" bench --device cuda -m "$MODELS/llama2-7b-$t.gguf" -p 1 -n 64 -r 1 \
                > "$f.csv" 2> "$f.err"
            log "profile $t $e rc=$?"
            python3 scripts/ncu_profile_sum.py "$f.csv" --sequence "${AB_PROFILE_SEQ:-12}" | tee "$f.txt"
            rm -f "$f.csv"
        done
    done
    pack
fi

# the 16-token prefill too: an eager step (decode steps are graphs), so it shows host time per
# launch
ab_one() { # round type model setting: every binary of AB_BINS
    local bin r line
    for bin in ${AB_BINS:-$BD/swiftinfer}; do
        r=$(with_env "$4" timeout 100 "$bin" bench --device cuda --bw 4210 -m "$3" -p 16 \
            -n 128 -r 2 2>&1 | grep -E "\| (pp16|tg128) |error" || echo "(no tg line)")
        while IFS= read -r line; do
            echo "round $1 $2 $bin $4: $line" | tee -a "$W/tg.txt"
        done <<< "$r"
    done
}
ab_rounds "${AB_ROUNDS:-2}" "${AB_TYPES:-f16 q4_0 q8_0}" "${AB_ENVS:-SI_CUDA_PDL=0 SI_CUDA_PDL=1}" ab_one
log "ab: done"
