# scripts/gpu_7b_common.sh — sourced by the GPU tuning scripts (gpu_gemv_sweep.sh,
# gpu_decode_ab.sh) after they set NAME (their log folder and archive): the binaries, the log
# folder $W packed into $OUT/$NAME.tgz, the host libraries, and the 7B models in /dev/shm.
set -u
cd "$(dirname "$0")/.."
BD=${SI_BIN_DIR:-build-cuda}
OUTDIR=${OUT:-/tmp}
W=$OUTDIR/$NAME
MODELS=/dev/shm/si7b
mkdir -p "$W" "$MODELS"
export SI_BIN_DIR=$BD
. tests/cuda/host_deps.sh
log() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }
pack() { tar -czf "$OUTDIR/$NAME.tgz" -C "$W" . 2>/dev/null; }
safe() { echo "$1" | tr '=,+' '___'; } # file names the device tool returns

# SI_SHAPE: the `synth --shape` of the models (default llama2-7b; e.g. llama3-8b), in the files'
# names too (the scripts that read $MODELS/llama2-7b-T.gguf themselves keep Llama-2-7B)
SHAPE=${SI_SHAPE:-llama2-7b}

# synth_7b TYPES: a $SHAPE-shaped model of each type in $MODELS, unless already there
synth_7b() {
    local t m
    for t in "$@"; do
        m=$MODELS/$SHAPE-$t.gguf
        [ -f "$m" ] || timeout 200 "$BD/swiftinfer" synth -o "$m" --shape "$SHAPE" --type "$t" \
            > "$W/synth-$t.txt" 2>&1 || { log "synth $t FAILED"; tail -5 "$W/synth-$t.txt"; }
    done
    log "models ready"
}

# with_env SETTING CMD...: CMD under SETTING, one assignment or several joined by "+" ("A=1+B=2")
with_env() {
    local e=$1
    shift
    env ${e//+/ } "$@"
}

# ab_rounds ROUNDS "TYPES" "SETTINGS" FN: FN ROUND TYPE MODEL SETTING for each round, each
# synthesised model of TYPES and each of SETTINGS, alternating so that drift between rounds
# shows; packs the logs after each round
ab_rounds() {
    local rounds=$1 types=$2 settings=$3 fn=$4 round t m e
    for round in $(seq "$rounds"); do
        for t in $types; do
            m=$MODELS/$SHAPE-$t.gguf
            [ -f "$m" ] || continue
            for e in $settings; do "$fn" "$round" "$t" "$m" "$e"; done
        done
        pack
    done
}
