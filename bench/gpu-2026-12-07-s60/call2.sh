#!/usr/bin/env bash
# Session 60, call 2 (session 59's prepared call4.sh, on this session's binaries):
# tests/cuda/run.sh whole, its sanitizer runs included (sessions 58 and 59 ran it without them, or
# only its model part), on every binary of build-gpucarry/COMMIT (gemv_direct.cuh's kernel
# included, and its general-kernel checks). CAP: the seconds it may take (default 570).
set -u
O=${O:-/tmp/o60b} B=build-gpucarry
. bench/gpu_call_env.sh
left=$((${CAP:-570} - ($(date +%s) - STEP_T0)))
SI_COMMIT=$(cut -d: -f1 $B/COMMIT) SI_BIN_DIR=$B OUT=$O/run timeout $left tests/cuda/run.sh > $O/runsh.txt 2>&1
step "run.sh rc=$?: $(grep '^== ' $O/runsh.txt | tr '\n' ' '), $(tail -1 $O/runsh.txt)"
step done
