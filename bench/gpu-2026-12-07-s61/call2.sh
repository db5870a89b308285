#!/usr/bin/env bash
# Session 61, call 2: the final binaries (gemv_direct's looping instance backed out: the code of
# session 60's GPU run but for comments) with test_cuda_model's sampling check that tolerates one
# boundary flip (parts_at_boundary): tests/cuda/run.sh's model part (SI_SKIP_KERNEL_TESTS=1:
# synth + test_cuda_model on every model, CLI smoke, Python API, serve, bench) in CAP seconds
# (default 420). Binaries: build-gpucarry/COMMIT.
set -u
O=${O:-/tmp/o61b} B=build-gpucarry
. bench/gpu_call_env.sh
SI_SKIP_KERNEL_TESTS=1 SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run \
    timeout ${CAP:-420} tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh (model part) rc=$?: $(grep -E 'FAILED|^== ' $O/runsh.txt | tr '\n' ' '), $(tail -n 1 $O/runsh.txt)"
grep -h "sampling on the gpu (seeded)\|^INFO   request" $O/run/test_cuda_model.log | cut -c1-260
step done
