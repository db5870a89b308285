#!/usr/bin/env bash
# Session 49, call 4: what call 3's 570 s did not reach, on the same binaries: run.sh's model
# part (whole-model logits GPU vs CPU, engine exactness, CLI, Python API, serve, bench of every
# synthesised model), racecheck over test_cuda_kernels --small, and the sampler's checks at every
# cluster size with memcheck over its --small checks.
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o4; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o4.tgz" --exclude="*.gguf" -C $O .; }
OUT=$O/model SI_BIN_DIR=build-gpucarry SI_SKIP_KERNEL_TESTS=1 timeout 260 tests/cuda/run.sh > $O/runsh-model.txt 2>&1
step "run.sh model part rc=$?: $(grep -c '^PASS' $O/runsh-model.txt) PASS lines, $(grep -c 'FAIL' $O/runsh-model.txt) FAIL lines, $(tail -1 $O/runsh-model.txt)"
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 build-gpucarry/test_cuda_kernels --small > $O/kernels-racecheck.txt 2>&1
step "test_cuda_kernels --small racecheck rc=$?: $(tail -1 $O/kernels-racecheck.txt)"
for c in "" 1 2 4 16; do
    SI_CUDA_SAMPLE_CLUSTER=$c timeout 40 build-gpucarry/test_cuda_sample --no-bench > $O/sample-c$c.txt 2>&1
    step "test_cuda_sample --no-bench cluster '${c:-default}' rc=$?: $(grep -c '^PASS' $O/sample-c$c.txt) PASS, $(grep -c '^FAIL' $O/sample-c$c.txt) FAIL"
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build-gpucarry/test_cuda_sample --small > $O/sample-memcheck.txt 2>&1
step "test_cuda_sample --small memcheck rc=$?: $(tail -1 $O/sample-memcheck.txt)"
step done
