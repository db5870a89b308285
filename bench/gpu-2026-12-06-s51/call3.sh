#!/usr/bin/env bash
# Session 51, call 3: binaries of ec01903 (x in parts from 12 rows, two launches at 9-11; the
# small GEMV shape 16 x 4096). test_cuda_kernels --gemv and test_cuda_fused, by default and with
# parts forced (SI_CUDA_GEMV_TC_PARTS=2); memcheck and racecheck over --small --gemv of six
# quantised types both ways; the engine at 9 and 12 requests, Llama-3-8B Q4_0 (9: now two
# launches by default, 12: parts).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
. tests/cuda/host_deps.sh > /dev/null 2>&1
O=/tmp/o3; mkdir -p $O
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; tar czf "$OUT/o3.tgz" --exclude="*.gguf" -C $O .; }
B=build-gpucarry
TYPES=q4_0,q4_1,q5_0,q5_1,iq4_nl,iq4_xs,q4_k,q5_k,q6_k,q3_k,q2_k,q8_0
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1
for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=2"; do
    k=$(echo $cfg | tr ' =' '_-')
    env $cfg timeout 240 $B/test_cuda_kernels --no-bench --gemv --types $TYPES > $O/kernels-$k.txt 2>&1
    step "[$cfg] test_cuda_kernels --no-bench --gemv rc=$?: $(grep -c '^FAIL' $O/kernels-$k.txt) FAIL lines, $(grep -c 'same bits nb 1..16' $O/kernels-$k.txt) 1..16 lines, $(tail -1 $O/kernels-$k.txt)"
    env $cfg timeout 120 $B/test_cuda_fused --no-bench > $O/fused-$k.txt 2>&1
    step "[$cfg] test_cuda_fused --no-bench rc=$?: $(grep -c '^FAIL' $O/fused-$k.txt) FAIL, $(tail -1 $O/fused-$k.txt)"
    for tool in memcheck racecheck; do
        env $cfg timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 $B/test_cuda_kernels --small --gemv --no-bench --types q4_0,q4_k,q6_k,q2_k,iq4_xs,q5_0 > $O/san-$tool-$k.txt 2>&1
        step "[$cfg] $tool --small --gemv rc=$?: $(grep -c '^FAIL' $O/san-$tool-$k.txt) FAIL, $(tail -1 $O/san-$tool-$k.txt)"
    done
done
m=/dev/shm/m-llama3-8b-q4_0.gguf
timeout 150 $B/swiftinfer synth -o $m --shape llama3-8b --type q4_0 > /dev/null 2>&1 || step "synth failed"
for cfg in "SI_NONE=0" "SI_CUDA_GEMV_TC_PARTS=1"; do
    f=$O/c-llama3-8b-q4_0-r1-$(echo $cfg | tr ' =' '_-').json
    env $cfg timeout 100 $B/swiftinfer bench --device cuda -m $m -c 9,12 -p 512 -n 128 --json > $f 2> ${f%.json}.err
    step "llama3-8b q4_0 [$cfg] rc=$?: $(grep -o '"concurrency": [0-9]*\|"all_decoding_tps": [0-9.]*' $f | awk '{printf "%s ", $2}')"
done
step done
