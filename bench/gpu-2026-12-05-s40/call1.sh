#!/usr/bin/env bash
# The device call that the opt-in weight types wait for (written in sessions 39 and 40, which were
# lent no GPU): Q5_0, Q5_1, Q5_K, Q2_K, Q3_K, IQ4_NL and IQ4_XS weights on the GPU. Run from the
# repository root with the binaries in build-gpucarry (README.md here says how to build and carry
# them); about 7 minutes. Each step prints one line; logs land in $OUT.
set -u
B=build-gpucarry
S=$(date +%s)
step() { echo "[$(( $(date +%s) - S )) s] $*"; }

# 1. the decoders on the host (no GPU; as CTest runs them), then every GEMV shape of the new
#    types against the CPU reference (1-8 rows, each row of 2-8 bit for bit its 1-row run), the
#    q4_k checks beside them as the control, and the whole small kernel set (get_rows and the
#    dequantise + cuBLASLt matmul of every type included); the 9-128-row int8 tensor-core matmul
#    (--mmq) of the new types but Q2_K (it declines Q2_K: dequantise + cuBLASLt, in --small);
#    memcheck on their GEMVs and matmuls
$B/test_cuda_decoders > "$OUT/decoders.txt" 2>&1
step "decoders rc=$? $(tail -1 "$OUT/decoders.txt")"
$B/test_cuda_kernels --gemv --no-bench --types q5_0,q5_1,q5_k,q2_k,q3_k,iq4_nl,iq4_xs,q4_k > "$OUT/gemv.txt" 2>&1
step "gemv rc=$? $(grep -c '^PASS' "$OUT/gemv.txt") PASS"; grep -E "^FAIL" "$OUT/gemv.txt" | head -20
$B/test_cuda_kernels --small --no-bench > "$OUT/kernels_small.txt" 2>&1
step "kernels --small rc=$? $(grep -c '^PASS' "$OUT/kernels_small.txt") PASS"
grep -E "^FAIL" "$OUT/kernels_small.txt" | head -20
$B/test_cuda_fused --no-bench > "$OUT/fused.txt" 2>&1 # the norm inside the new types' GEMVs too
step "fused rc=$? $(grep -c '^PASS' "$OUT/fused.txt") PASS"; grep -E "^FAIL" "$OUT/fused.txt" | head
$B/test_cuda_kernels --mmq --no-bench --types q5_0,q5_1,q5_k,q3_k,iq4_nl,iq4_xs,q4_k > "$OUT/mmq.txt" 2>&1
step "mmq rc=$? $(grep -c '^PASS' "$OUT/mmq.txt") PASS"; grep -E "^FAIL" "$OUT/mmq.txt" | head -20
for a in --gemv --mmq; do
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_kernels $a \
        --small --types q5_0,q5_1,q5_k,q2_k,q3_k,iq4_nl,iq4_xs > "$OUT/memcheck$a.txt" 2>&1
    step "memcheck $a rc=$? $(tail -1 "$OUT/memcheck$a.txt")"
done

# 2. the model part of run.sh (it sets SI_CUDA_NEW_TYPES=1 for its models): tiny-q5_0/q5_1/q5_k/
#    q2_k/q3_k/iq4_nl/iq4_xs logits against the CPU backend and the engine's exactness (alone = batched) on the
#    GPU, besides every other model
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 300 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
step "run.sh rc=$? $(grep -cE '^PASS' "$OUT/runsh.txt") PASS"
grep -E "^FAIL|FAILED|RUN.SH" "$OUT/runsh.txt" | cut -c1-300 | head -20
cp /tmp/rs/test_cuda_model.log "$OUT/" 2>/dev/null

# 3. the opt-in: without SI_CUDA_NEW_TYPES=1 such a model is refused with one line naming the
#    switch
$B/swiftinfer synth -o /tmp/q5k.gguf --type q5_k > /dev/null 2>&1
$B/swiftinfer run --device cuda -m /tmp/q5k.gguf -p hi -n 4 > "$OUT/optin.txt" 2>&1
step "without SI_CUDA_NEW_TYPES rc=$? (want 1): $(tail -1 "$OUT/optin.txt" | cut -c1-200)"
export SI_CUDA_NEW_TYPES=1
$B/swiftinfer run --device cuda -m /tmp/q5k.gguf -p hi -n 4 > "$OUT/optin.txt" 2>&1
step "with SI_CUDA_NEW_TYPES=1 rc=$? (want 0)"
