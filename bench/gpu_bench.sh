#!/usr/bin/env bash
# gpu_bench.sh BIN OUTDIR — issue 6's 7B benchmarks on the GPU machine, one model at a time:
# synthesise a Llama-2-7B-shaped model (`BIN synth`, skipped when the file exists), measure
# pp2048 and tg128 (`BIN bench --device cuda --bw 4210 -p 2048 -n 128 -r 3 --json`), then the
# batched case (64 requests of 512 prompt + 128 generated tokens through the engine:
# `BIN bench --device cuda -c 64 -p 512 -n 128 --json`), and finally write a markdown summary
# against the issue's llama.cpp reference to OUTDIR/summary.md (also printed).
#
# Environment (all optional):
#   GPU_BENCH_TYPES        weight types of llama2-7b, in order (default "f16 bf16 q8_0 q4_0 q4_k")
#   GPU_BENCH_LLAMA3       1: also llama3-8b in GPU_BENCH_LLAMA3_TYPES (default 0)
#   GPU_BENCH_LLAMA3_TYPES default "f16 q4_0"
#   GPU_BENCH_BATCHED      0: skip the 64-request run (default 1)
#   GPU_BENCH_KV_FP8       1: run the 64-request case again with --kv-cache-dtype fp8 (default 1)
#   GPU_BENCH_PP_BATCH     prompt tokens per eval call for pp2048 (`-b`; default: the CLI's 512)
#   GPU_BENCH_MODEL_DIR    where models go (default: /dev/shm/si7b when /dev/shm has 32 GiB free,
#                          so no disk writeback competes; else /tmp/si7b)
#   GPU_BENCH_KEEP         1: keep each model after benching it (default: delete it when less
#                          than 24 GiB would stay free in the model directory)
#   GPU_BENCH_STEP_TIMEOUT seconds one synth or bench may take before it is killed (default 300)
#   GPU_BENCH_DEADLINE_S   start no new model after this many seconds (default 0: no limit), so
#                          a command chained after this script still gets its time
#
# One 10-minute device call fits about three 7B types (estimates in the final report of the
# benchmarking session and bench/RESULTS.md); split the rest with GPU_BENCH_TYPES.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BIN OUTDIR   (see the header for the GPU_BENCH_* variables)" >&2
    exit 2
fi
BIN=$1
OUT=$2
TYPES=${GPU_BENCH_TYPES:-f16 bf16 q8_0 q4_0 q4_k}
LLAMA3=${GPU_BENCH_LLAMA3:-0}
LLAMA3_TYPES=${GPU_BENCH_LLAMA3_TYPES:-f16 q4_0}
BATCHED=${GPU_BENCH_BATCHED:-1}
KV_FP8=${GPU_BENCH_KV_FP8:-1}
KEEP=${GPU_BENCH_KEEP:-0}
STEP_TIMEOUT=${GPU_BENCH_STEP_TIMEOUT:-300}
# the carried host libraries (tests/cuda/host_deps.sh; .debs is relative to the repository root),
# so that the script also runs on its own, not only under scripts/gpu_all.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
pushd "$ROOT" > /dev/null && . tests/cuda/host_deps.sh && popd > /dev/null
DEADLINE=${GPU_BENCH_DEADLINE_S:-0}
BW_GBPS=4210 # the issue's measured H200 copy bandwidth, GB/s
PP_BATCH_ARGS=()
[ -n "${GPU_BENCH_PP_BATCH:-}" ] && PP_BATCH_ARGS=(-b "$GPU_BENCH_PP_BATCH")

log() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*"; }

free_gib() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1048576) }'; }

if [ ! -x "$BIN" ]; then
    echo "$0: $BIN is not an executable" >&2
    exit 2
fi
mkdir -p "$OUT" || exit 2
if [ -n "${GPU_BENCH_MODEL_DIR:-}" ]; then
    MODELS=$GPU_BENCH_MODEL_DIR
elif [ "$(free_gib /dev/shm || echo 0)" -ge 32 ] 2>/dev/null; then
    MODELS=/dev/shm/si7b
else
    MODELS=/tmp/si7b
fi
mkdir -p "$MODELS" || exit 2

log "gpu_bench: BIN=$BIN OUT=$OUT models in $MODELS ($(free_gib "$MODELS") GiB free)"
log "types: llama2-7b: $TYPES$([ "$LLAMA3" = 1 ] && echo "; llama3-8b: $LLAMA3_TYPES")"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: ${SI_COMMIT:-$(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
        2>/dev/null || echo unknown)"
    echo "cpu: $(nproc) cores, $(awk '/MemTotal/ { print int($2 / 1048576) " GiB" }' /proc/meminfo)"
} | tee "$OUT/env.txt"
# this GPU's own ceiling beside the issue's 4.21 TB/s (`bench --memory --device cuda`: device-to-
# device copies, bytes read + written), so a run on another card reads against its own memory
"$BIN" bench --memory --device cuda --json > "$OUT/memory.json" 2> "$OUT/memory.log" \
    && log "copy bandwidth measured: $(cat "$OUT/memory.json")" \
    || log "copy bandwidth not measured (tail of $OUT/memory.log): $(tail -c 300 "$OUT/memory.log")"

# summary: OUT/summary.md from the JSON written so far (after every model, so a run cut short
# by the device call's time limit still brings one back).
summary() {
    python3 - "$OUT" "$BW_GBPS" > "$OUT/summary.md" <<'EOF'
import glob, json, os, sys

out, bw = sys.argv[1], float(sys.argv[2])
# The issue's llama.cpp reference on the same H200 (Llama-2-7B shape): pp2048, tg128, 64-seq gen.
REF = {"f16": (18961, 224, 4753), "q8_0": (11127, 273, None), "q4_0": (11009, 359, 3857)}

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def fmt(x, spec="{:,.0f}"):
    return "—" if x is None else spec.format(x)

def ratio(a, b):
    return "—" if a is None or not b else "{:.2f}".format(a / b)

print(open(os.path.join(out, "env.txt")).read().strip().replace("\n", "  \n"))
mem = load(os.path.join(out, "memory.json")) or {}
own = mem.get("best_gbps") if mem.get("what") == "gpu copy" else None
print("  \ncopy bandwidth measured here: {} GB/s".format(fmt(own, "{:,.1f}")))
print()
print("| model | pp2048 t/s | tg128 t/s | tg of {:.2f} TB/s | tg of {} (measured here) "
      "| 64x(512+128) gen t/s "
      "| decode t/s | all-decoding t/s | all-decoding, fp8 KV | pp / ref | tg / ref "
      "| all-decoding / ref | fp8 KV / ref |".format(
          bw / 1000, "—" if own is None else "{:.2f} TB/s".format(own / 1000)))
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
names = sorted({os.path.basename(p).split(".")[0] for pat in ("*.bench.json", "*.batched.json")
                for p in glob.glob(os.path.join(out, pat))})
for name in names:
    pp = tg = frac = gen = dec = alld = None
    b = load(os.path.join(out, name + ".bench.json"))
    for r in (b or {}).get("results", []):
        if r.get("test", "").startswith("pp"):
            pp = r["avg_ts"]
        elif r.get("test", "").startswith("tg"):
            tg, frac = r["avg_ts"], r.get("roofline_frac")
    c = load(os.path.join(out, name + ".batched.json"))
    if c:
        gen = c[0]["aggregate_tps"]
        dec = c[0]["per_request_tps"] * c[0]["concurrency"]
        alld = c[0].get("all_decoding_tps")
    f8 = load(os.path.join(out, name + ".batchedfp8.json"))
    alld8 = f8[0].get("all_decoding_tps") if f8 else None
    ref = REF.get(name.split("-")[-1]) if name.startswith("llama2-7b") else None
    ref = ref or (None, None, None)
    frac_own = frac * bw / own if frac is not None and own else None
    print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        name, fmt(pp), fmt(tg, "{:,.1f}"), fmt(frac, "{:.2f}"), fmt(frac_own, "{:.2f}"),
        fmt(gen), fmt(dec), fmt(alld),
        fmt(alld8), ratio(pp, ref[0]), ratio(tg, ref[1]), ratio(alld, ref[2]), ratio(alld8, ref[2])))
print()
print("gen t/s: all generated tokens / wall time of the 64-request run, prefill included "
      "(64 x 512 prompt tokens, chunked 512 per step). decode t/s: the sum over requests of "
      "(tokens - 1) / (last token - first token), which counts steps shared with other "
      "requests' prefill chunks. all-decoding t/s: the tokens of all requests between the last "
      "first token and the first finish over that time, i.e. the rate while all 64 decode and "
      "nothing prefills; llama.cpp's 64-seq figure is that rate (batched-bench S_TG: all prompts "
      "first, then generation), so the ratio uses it (the issue's target: >= 1.5). fp8 KV: the "
      "same run with --kv-cache-dtype fp8 (E4M3 keys and values, half the bytes; the reference "
      "keeps f16). "
      "tg fraction: tg t/s x weight bytes read per token / {:.2f} TB/s (the issue's H200), "
      "and / this GPU's copy bandwidth measured at the start.".format(bw / 1000))
EOF
}

fail=0
# bench_one SHAPE TYPE: synth (unless present), pp/tg, batched; logs and JSON under OUT.
bench_one() {
    local shape=$1 type=$2 name="$1-$2"
    local model="$MODELS/$name.gguf"
    if [ -f "$model" ]; then
        log "$name: model present, not synthesised again"
    else
        log "$name: synth"
        local t0=$SECONDS
        if ! timeout "$STEP_TIMEOUT" "$BIN" synth -o "$model" --shape "$shape" --type "$type" \
            > "$OUT/$name.synth.log" 2>&1; then
            log "$name: synth FAILED (tail of $OUT/$name.synth.log):"
            tail -c 600 "$OUT/$name.synth.log"
            echo
            rm -f "$model.partial"
            fail=1
            return
        fi
        log "$name: synth done in $((SECONDS - t0)) s ($(du -h "$model" | cut -f1))"
    fi

    log "$name: bench pp2048 + tg128"
    if timeout "$STEP_TIMEOUT" "$BIN" bench --device cuda --bw "$BW_GBPS" -p 2048 -n 128 -r 3 \
        "${PP_BATCH_ARGS[@]}" --json -m "$model" > "$OUT/$name.bench.json" \
        2> "$OUT/$name.bench.log"; then
        grep -E "ready in|uploaded" "$OUT/$name.bench.log" | head -3
        grep -Eo '"test": "[a-z0-9]+"|"avg_ts": [0-9.]+|"roofline_frac": [0-9.]+' \
            "$OUT/$name.bench.json" | paste -sd ' ' | sed 's/^/    /'
    else
        log "$name: bench FAILED (tail of $OUT/$name.bench.log):"
        tail -c 800 "$OUT/$name.bench.log"
        echo
        fail=1
    fi

    if [ "$BATCHED" = 1 ]; then
        log "$name: bench -c 64 -p 512 -n 128"
        if timeout "$STEP_TIMEOUT" "$BIN" bench --device cuda -c 64 -p 512 -n 128 --json \
            -m "$model" > "$OUT/$name.batched.json" 2> "$OUT/$name.batched.log"; then
            sed 's/^/    /' "$OUT/$name.batched.json"
        else
            log "$name: batched bench FAILED (tail of $OUT/$name.batched.log):"
            tail -c 800 "$OUT/$name.batched.log"
            echo
            fail=1
        fi
    fi

    if [ "$BATCHED" = 1 ] && [ "$KV_FP8" = 1 ]; then
        log "$name: bench -c 64 -p 512 -n 128 --kv-cache-dtype fp8"
        if timeout "$STEP_TIMEOUT" "$BIN" bench --device cuda -c 64 -p 512 -n 128 --json \
            --kv-cache-dtype fp8 -m "$model" > "$OUT/$name.batchedfp8.json" \
            2> "$OUT/$name.batchedfp8.log"; then
            sed 's/^/    /' "$OUT/$name.batchedfp8.json"
        else
            log "$name: batched fp8 bench FAILED (tail of $OUT/$name.batchedfp8.log):"
            tail -c 800 "$OUT/$name.batchedfp8.log"
            echo
            fail=1
        fi
    fi

    if [ "$KEEP" != 1 ] && [ "$(free_gib "$MODELS")" -lt 24 ]; then
        rm -f "$model"
        log "$name: deleted to free space ($(free_gib "$MODELS") GiB free now)"
    fi
}

RUNS=""
for type in $TYPES; do RUNS="$RUNS llama2-7b:$type"; done
if [ "$LLAMA3" = 1 ]; then
    for type in $LLAMA3_TYPES; do RUNS="$RUNS llama3-8b:$type"; done
fi
for run in $RUNS; do
    if [ "$DEADLINE" -gt 0 ] && [ "$SECONDS" -ge "$DEADLINE" ]; then
        log "${run/:/-}: skipped, past GPU_BENCH_DEADLINE_S=$DEADLINE"
        fail=1
        continue
    fi
    bench_one "${run%%:*}" "${run##*:}"
    summary
done

cat "$OUT/summary.md"
log "done$([ $fail = 1 ] && echo ", with FAILURES (see the logs in $OUT)")"
exit $fail
