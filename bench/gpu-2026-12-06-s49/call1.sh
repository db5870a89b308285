#!/usr/bin/env bash
# Session 49, call 1: the GEMV chain with epoch-tagged x and y and no PDL wait (gemv_q8x.cuh
# Q8X_TAGGED, an experiment: tagged.patch) against the same kernel on plain x and y with the
# wait. test_cuda_kernels' Q4_0 GEMV checks (the patch touches the GEMV body); persist_chain's
# tagged lines, two runs; the default persist_chain lines for reference.
# Run from the repository root with build-gpucarry/s49.tar.xz unpacked (README.md here).
set -u
B=build-gpucarry/s49
S=$(date +%s)
O=/tmp/o1; mkdir -p $O
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }

nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv > "$O/gpu.txt" 2>&1
step "$(tail -1 "$O/gpu.txt")"
timeout 150 $B/test_cuda_kernels --no-bench --gemv --types q4_0 > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --gemv --types q4_0 rc=$?: $(grep -c '^FAIL' "$O/kernels.txt") FAIL lines, $(tail -1 "$O/kernels.txt")"
for r in 1 2; do
    timeout 150 $B/persist_chain q4_0 20 1 tagged > "$O/tagged-$r.txt" 2>&1
    step "tagged run $r rc=$?: $(grep -E 'gemv|check' "$O/tagged-$r.txt" | tr -s ' ' | tr '\n' ';')"
done
timeout 240 $B/persist_chain q4_0 10 > "$O/chain.txt" 2>&1
step "persist_chain q4_0 rc=$?: $(grep -E '^(gemv|kernels)' "$O/chain.txt" | tr -s ' ' | tr '\n' ';')"
step "done"
