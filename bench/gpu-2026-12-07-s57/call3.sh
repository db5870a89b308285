#!/usr/bin/env bash
# Session 57, call 3 (the machine still warm after call 2, ~390 device seconds left): what each
# kernel of a batch-1 Q4_0 token costs inside the graph now that gate/up ends in SwiGLU (the
# SI_CUDA_SKIP masks, scripts/ingraph_costs.py; 192 and 466 leave out the GLU GEMV and the SwiGLU
# kernel that 64 alone would put back), every binary of 244af1a.
set -u
O=/tmp/o57c B=build-gpucarry
. bench/gpu_call_env.sh
SI_BIN_DIR=$B OUT=$O AB_TYPES=q4_0 AB_PROFILE_TYPES=" " AB_ROUNDS=2 AB_ENVS="SI_CUDA_SKIP=0 \
  SI_CUDA_SKIP=12 SI_CUDA_SKIP=2 SI_CUDA_SKIP=16 SI_CUDA_SKIP=192 SI_CUDA_SKIP=256 SI_CUDA_SKIP=466" \
  timeout 200 scripts/gpu_decode_ab.sh > $O/ab.txt 2>&1
step "decode_ab rc=$?: $(grep -c tg128 $O/ab.txt) tg lines"
python3 scripts/ingraph_costs.py $O/ab/tg.txt > $O/ingraph_costs.txt 2>&1
step "$(cat $O/ingraph_costs.txt)"
