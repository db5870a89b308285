#!/usr/bin/env bash
# Session 45, call 3: call 2 cut to the session's last ~170 device seconds. The landed decoders
# (4454050's binaries, as call 2): test_cuda_kernels' checks of the six changed types and Q6_K
# (restored), memcheck over their --small checks, then run.sh's model part for what time is left.
set -u
B=build-gpucarry
S=$(date +%s)
O=/tmp/o; mkdir -p $O/runsh
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/logs.tgz" -C $O .; }
TYPES=q5_0,q5_1,q3_k,q2_k,iq4_nl,iq4_xs,q6_k
timeout 60 $B/test_cuda_kernels --no-bench --types $TYPES > "$O/kernels.txt" 2>&1
step "test_cuda_kernels --no-bench --types $TYPES rc=$?: $(tail -1 "$O/kernels.txt")"
timeout 70 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels --small --types $TYPES \
    > "$O/sanitize-memcheck.txt" 2>&1
step "memcheck rc=$?: $(tail -1 "$O/sanitize-memcheck.txt")"
OUT=$O/runsh SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 150 tests/cuda/run.sh > "$O/runsh.txt" 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' "$O/runsh.txt") PASS, $(grep -c 'FAIL' "$O/runsh.txt") FAIL lines, $(tail -1 "$O/runsh.txt")"
