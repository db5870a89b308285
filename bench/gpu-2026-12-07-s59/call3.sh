#!/usr/bin/env bash
# Session 59, call 3: session 58's binaries (build-gpucarry/COMMIT: the final head's code but for
# comments) at SmolLM2-135M's QKV shape, 960 x 576, which the general f32-x GEMV takes for the
# quantised types: its checks (never run on a GPU before), then its timings beside call 2's q8x
# ones.
set -u
O=${O:-/tmp/o59c} B=build-gpucarry
. bench/gpu_call_env.sh
timeout 30 $B/test_cuda_kernels --gemv --no-bench --shape 960x576 > $O/k-960x576.txt 2>&1
step "test_cuda_kernels --gemv --no-bench --shape 960x576 rc=$?: $(grep -c '^PASS' $O/k-960x576.txt) PASS, $(grep -c '^FAIL' $O/k-960x576.txt) FAIL, $(tail -1 $O/k-960x576.txt)"
timeout 40 $B/test_cuda_kernels --gemv --shape 960x576 > $O/k-timed-960x576.txt 2>&1
step "timed rc=$?: $(grep -E '^gemv .*nb=1 ' $O/k-timed-960x576.txt | tr -s ' ' | cut -d'|' -f1 | tr '\n' ';')"
step done
