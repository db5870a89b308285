#!/usr/bin/env bash
# Session 49, call 2: the tagged lines four ways (tagged.patch's flags): the Q8X_TAGGED kernel
# with tagged x with and without the PDL wait, with plain x with and without it (without: a
# timing only), and the Q8X_F32 kernel; two runs.
set -u
B=build-gpucarry/s49
S=$(date +%s)
O=/tmp/o2; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$O/gpu.txt" 2>&1
step "$(tail -1 "$O/gpu.txt")"
for r in 1 2; do
    timeout 150 $B/persist_chain q4_0 20 1 tagged > "$O/tagged-$r.txt" 2>&1
    step "tagged run $r rc=$?: $(grep -E 'gemv|tag|check' "$O/tagged-$r.txt" | tr -s ' ' | cut -c1-40 | tr '\n' ';')"
done
step "done"
