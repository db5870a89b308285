#!/bin/sh
# bench/run_cpu.sh — issue 3's CPU benchmark: synthesises the SmolLM2-135M and TinyLlama-1.1B
# shaped models (random weights, the Llama-2 32000-token SentencePiece vocabulary the llama.cpp
# reference numbers use) in every benchmarked type, then measures DRAM bandwidth and pp/tg with
# `swiftinfer bench`, writing JSON that bench/plot_results.py turns into the RESULTS.md table
# and bench/cpu_tg.png.
#
# usage: bench/run_cpu.sh BUILD_DIR OUT_DIR [THREADS=2] [REPS=3]
# The models (about 6 GB) go to $SI_BENCH_MODELS (default /tmp/swiftinfer-bench), not the repo.
# smollm2-135m has no q4_k variant: its rows of 576 are not a multiple of q4_k's 256-element block.
set -eu
BIN=$1/swiftinfer
OUT=$2
T=${3:-2}
R=${4:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${SI_BENCH_MODELS:-/tmp/swiftinfer-bench}
VOCAB=${SI_BENCH_VOCAB:-$ROOT/../shared/testdata/tokenizer/ggml-vocab-llama-spm.gguf}
[ -f "$VOCAB" ] || VOCAB=/work/shared/testdata/tokenizer/ggml-vocab-llama-spm.gguf
mkdir -p "$MODELS" "$OUT"

LIST=""
for shape in smollm2-135m tinyllama-1.1b; do
    for type in f16 q8_0 q4_0 q4_1 q4_k; do
        [ "$shape-$type" = smollm2-135m-q4_k ] && continue
        f=$MODELS/$shape-$type.gguf
        [ -f "$f" ] || "$BIN" synth --shape "$shape" --type "$type" --vocab-from "$VOCAB" -o "$f"
        LIST="$LIST${LIST:+,}$f"
    done
done
LIST="$LIST,$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"

"$BIN" bench --memory --device cpu -t "$T" --json > "$OUT/memory.json"
BW=$(sed -n 's/.*"best_gbps": \([0-9.]*\).*/\1/p' "$OUT/memory.json")
"$BIN" bench --device cpu -m "$LIST" -p 128 -n 64 -t "$T" -r "$R" --bw "$BW" --json > "$OUT/bench.json"
echo "wrote $OUT/memory.json and $OUT/bench.json (bandwidth $BW GB/s)" >&2
