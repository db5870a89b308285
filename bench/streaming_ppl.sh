#!/usr/bin/env bash
# streaming_ppl.sh — StreamingLLM's perplexity experiment (Xiao et al. 2023, fig. 3) on the
# default model: dense attention vs attention sinks + window vs window only.
#
# Text: the licence texts Debian ships in /usr/share/common-licenses (English legal prose, no
# network needed), concatenated once, near-duplicates (GFDL-1.2, LGPL-2, GPL-1) left out so
# that the long context cannot just copy (39,094 tokens with SmolLM2's tokenizer). Every mode
# reads the first MAX_TOKENS tokens and is scored on the same predictions: full mode is
# llama.cpp's method over consecutive windows of CTX tokens (the second half of each scored),
# and the streaming modes pass --score-like-ctx CTX, which scores exactly those predictions
# while the cache streams over the whole text.
#
# usage: bench/streaming_ppl.sh [BUILD_DIR] [MODEL]    env: MAX_TOKENS (default 2048 = CTX;
#        39094 = the whole text), MODES (default: all seven, names as in the table),
#        THREADS (default 2), OUT (default /tmp/streaming_ppl), PARALLEL=1 runs the modes at
#        once (with THREADS=1 each; faster on a shared machine), SKIP_DONE=1 keeps results
#        already in OUT
set -euo pipefail
BUILD=${1:-build}
MODEL=${2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
CTX=2048
MAX_TOKENS=${MAX_TOKENS:-$CTX}
THREADS=${THREADS:-2}
OUT=${OUT:-/tmp/streaming_ppl}
mkdir -p "$OUT"
TEXT=$OUT/licenses.txt
L=/usr/share/common-licenses
cat $L/GPL-3 $L/GPL-2 $L/LGPL-2.1 $L/LGPL-3 $L/Apache-2.0 $L/Artistic $L/MPL-2.0 $L/MPL-1.1 \
    $L/GFDL-1.3 $L/CC0-1.0 $L/BSD > "$TEXT"
BIN=$BUILD/swiftinfer
COMMON=(-m "$MODEL" -f "$TEXT" -t "$THREADS" --max-tokens "$MAX_TOKENS" --json -q)
MODES=${MODES:-full-2048 sinks-4+1020 window-1024 sinks-4+252 window-256 sinks-4+60 window-64}

run() { # name, args...
    local name=$1; shift
    [[ " $MODES " == *" $name "* ]] || return 0
    [[ ${SKIP_DONE:-0} == 1 && -s $OUT/$name.json ]] && return
    echo "== $name: $BIN perplexity ${COMMON[*]} $*" >&2
    if [[ ${PARALLEL:-0} == 1 ]]; then
        "$BIN" perplexity "${COMMON[@]}" "$@" > "$OUT/$name.json" &
    else
        "$BIN" perplexity "${COMMON[@]}" "$@" > "$OUT/$name.json"
    fi
}
run full-2048      --ctx $CTX
run sinks-4+1020   --sink 4 --window 1020 --score-like-ctx $CTX
run window-1024    --window 1024 --no-sink --score-like-ctx $CTX
run sinks-4+252    --sink 4 --window 252 --score-like-ctx $CTX
run window-256     --window 256 --no-sink --score-like-ctx $CTX
run sinks-4+60     --sink 4 --window 60 --score-like-ctx $CTX
run window-64      --window 64 --no-sink --score-like-ctx $CTX
wait

python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print("| mode | sink | window | cache (tokens) | tokens scored | ppl | seconds |")
print("|---|---|---|---|---|---|---|")
for name in ["full-2048", "sinks-4+1020", "window-1024", "sinks-4+252", "window-256",
             "sinks-4+60", "window-64"]:
    if not (out / f"{name}.json").exists():
        continue
    j = json.loads((out / f"{name}.json").read_text())
    print(f"| {j['mode']} | {j['sink']} | {j['window'] or '-'} | "
          f"{j['cache_tokens']} | {j['n_scored']} | {j['ppl']:.3f} | {j['seconds']:.0f} |")
PY
