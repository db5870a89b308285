#!/usr/bin/env bash
# Session 49, call 3: tests/cuda/run.sh's kernel part on the final code's binaries (every kernel
# test of every type against the CPU reference, then under compute-sanitizer memcheck and
# racecheck); the model part is call 4. Binaries: build-gpucarry/bins.tar.xz (README.md here).
set -u
R=$PWD
cd build-gpucarry && tar xJf bins.tar.xz && cd ..
export LD_LIBRARY_PATH=$R/build-gpucarry
O=$OUT/runsh; mkdir -p $O
S=$(date +%s)
OUT=$O SI_BIN_DIR=build-gpucarry SI_SKIP_MODEL=1 timeout 570 tests/cuda/run.sh > $O/runsh.txt 2>&1
echo "[$(( $(date +%s) - S )) s] run.sh kernel part rc=$?"
grep -E "PASS|FAIL|ERROR|passed|failed|hazard|error" $O/runsh.txt | tail -40
