#!/usr/bin/env bash
# The device call of the attention + output projection experiment (README.md here): one call,
# about 3 minutes. Run from the repository root with the binaries in build-gpucarry (attn_wo among
# them). Each step prints one line; logs land in $OUT.
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

# 1. the check and the timings: the fused kernel's y against the double reference (PASS/FAIL a
#    KV length), then per layer what the engine's attention + output projection and the fused
#    kernel add to a QKV GEMV in a 32-layer graph; twice, to see the spread
for round in 1 2; do
    timeout 120 $B/attn_wo 20 16,64,128,512,2048 > "$OUT/attn_wo-$round.txt" 2>&1
    step "attn_wo round $round rc=$?"; cat "$OUT/attn_wo-$round.txt"
done
# 2. without PDL (every launch in full stream order): how much of each comes from the overlap
SI_CUDA_PDL=0 timeout 120 $B/attn_wo 20 128 > "$OUT/attn_wo-nopdl.txt" 2>&1
step "attn_wo SI_CUDA_PDL=0 rc=$?"; cat "$OUT/attn_wo-nopdl.txt"
# 3. memcheck on the fused kernel (2 reps: the check and one round of graphs)
timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 $B/attn_wo 1 128 \
    > "$OUT/memcheck.txt" 2>&1
step "memcheck rc=$? $(tail -1 "$OUT/memcheck.txt")"
