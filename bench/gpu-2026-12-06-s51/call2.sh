#!/usr/bin/env bash
# Session 51, call 2 (binaries of call 1): (a) where call 1's racecheck hazards come from: the
# 5-8-row tensor-core kernels (MT = 1) reported hazards under SI_CUDA_GEMV_TC_PARTS=2 over the
# --small shapes; racecheck of Q4_K alone on the new 20 x 8192 shape and on 40 x 2048, with and
# without the knob, and the SASS at the reported offsets; (b) Llama-3-8B Q4_0 at 9, 10, 11
# requests, parts against two launches (call 1: parts 9 % slower at 9, 12 % faster at 12);
# (c) the GEMV alone at 4096 x 14336 and 4096 x 11008 (test_cuda_kernels' timings at 1-16 rows).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o2; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o2.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
for cfg in "SI_NONE=0:20x8192" "SI_CUDA_GEMV_TC_PARTS=2:20x8192" "SI_NONE=0:40x2048" "SI_CUDA_GEMV_TC_PARTS=2:40x2048"; do
    IFS=: read -r e sh <<< "$cfg"
    f=$O/race-$(echo $e | tr '=' '-')-$sh.txt
    env $e timeout 120 compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 3 $B/test_cuda_kernels --small --gemv --no-bench --types q4_k --shape $sh > $f 2>&1
    step "racecheck [$e] q4_k $sh rc=$?: $(grep -c 'Race reported' $f) race lines, $(tail -1 $f)"
done
for fn in _Z18gemv_q8x_tc_kernelI7tc_q4_kLi3ELi0ELi1ELi1EEvPKhiimPKfiPfi _Z18gemv_q8x_tc_kernelI7tc_q4_kLi3ELi0ELi2ELi2EEvPKhiimPKfiPfi; do
    cuobjdump -sass -fun $fn $B/test_cuda_kernels > $O/sass-$fn.txt 2>&1
    step "sass $fn: $(wc -l < $O/sass-$fn.txt) lines"
done
m=/dev/shm/m-llama3-8b-q4_0.gguf
timeout 150 $B/swiftinfer synth -o $m --shape llama3-8b --type q4_0 > /dev/null 2>&1 || step "synth failed"
for r in 1 2; do
    for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=1"; do
        f=$O/c-llama3-8b-q4_0-r$r-$(echo $cfg | tr ' =' '_-').json
        env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c 9,10,11 -p 512 -n 128 --json > $f 2> ${f%.json}.err
        step "llama3-8b q4_0 r$r [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
    done
done
rm -f $m
for sh in 4096x14336 4096x11008; do
    for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=1"; do
        f=$O/kbench-$sh-$(echo $cfg | tr ' =' '_-').txt
        env $cfg timeout 60 $B/test_cuda_kernels --gemv --types q4_0,q4_k --shape $sh > $f 2>&1
        step "kernel bench $sh [$cfg] rc=$?: $(grep -E '^gemv .* nb=(8|12|16) ' $f | head -0 | wc -l) $(grep -cE 'us' $f) timing lines"
    done
done
step done
