#!/usr/bin/env bash
# tests/cuda/run.sh — the CUDA kernel tests on the GPU machine, in one call:
#   1. configure + build (Release, SWIFTINFER_CUDA=ON) in build-cuda (falls back to plain nvcc
#      when the host libraries the full project needs, e.g. PCRE2, are missing there);
#      SI_BIN_DIR=DIR skips the build and takes every binary from DIR instead (built on the
#      development machine with the same CMake options and carried: saves device minutes);
#   2. every kernel test (test_cuda_kernels, test_cuda_<family>): each kernel vs the CPU
#      reference, then timings;
#   3. the checks, in parallel (SI_JOBS at a time, default half the CPUs; each its own log in
#      $OUT/checks/), in the background beside 4's logits tests: each kernel test with --small
#      under compute-sanitizer memcheck and racecheck; the knobs' passes (sampler cluster sizes,
#      the narrow norm GEMVs, the opt-in tensor-core F16/BF16 GEMV, the general f32-x GEMV where
#      gemv_direct takes the rows by default, x in parts / compact scales), sanitized too
#      (SI_SKIP_KERNEL_TESTS=1 skips 2 and 3; SI_SANITIZE=0 skips the sanitizers; SI_KTESTS="a b"
#      runs only those kernel tests; SI_SKIP_MODEL=1 skips 4);
#   4. the whole model on the GPU: the full project (swiftinfer CLI, test_cuda_model) built with
#      CUDA, synthetic models written by `swiftinfer synth` (tiny, tiny-qwen2, smollm2-135m in
#      f16/q8_0/q4_0/q4_1 (q4_1: the default model's type; its n_embd 576 takes gemv_direct),
#      tiny in q8_0/q4_0/q4_1/q4_k/q5_0/q5_1/q5_k/q6_k/q2_k/q3_k/iq4_nl/iq4_xs
#      (n_embd 256: the batch-1 GEMVs with the norm inside; the 5-8-row steps of all but q8_0 on
#      tensor cores) and in llama.cpp's q3_k_m, q4_k_m and q5_k_m mixtures (attn_v of another
#      type than attn_q: Q and K as one matmul, V another); llama2-7b q4_0 with SI_SYNTH_7B=1;
#      more with SI_EXTRA_MODELS), whole-model logits GPU vs CPU and the engine's exactness on
#      the GPU (test_cuda_model; the F16 models also with SI_CUDA_GEMV_H16_MMA=1, tiny
#      q4_0/q8_0/q4_k/q6_k also with SI_CUDA_GEMV_GLU=2), a CLI smoke run, the Python API with
#      device="cuda" against "cpu" (tests/cuda/python_api_gpu.py; needs libswiftinfer.so),
#      `serve --device cuda` over HTTP (tests/cuda/serve_gpu.py: the KV pool's default;
#      logit_bias and penalties sampled on the GPU), then `swiftinfer bench --device cuda -p 512
#      -n 128` on every synthesised model;
#   5. the kernel timings against the newest saved run's (scripts/timing_diff.py: a report).
# The host libraries the full project needs (PCRE2, utf8proc, jansson, libmicrohttpd, xxhash,
# cmocka) are missing on the GPU image: when .debs/ holds their Debian packages (carried; see
# tests/cuda/LAST_RUN.md) they are unpacked into /tmp/deps, never into /.
# Logs go to ${OUT:-/tmp}/. Exit status non-zero on any failure.
set -u -o pipefail
cd "$(dirname "$0")/../.."
LOG=${OUT:-/tmp}
mkdir -p "$LOG" build-cuda
fail=0
# the checks' parallelism (checks_start), refused before anything runs when it is no count
jobs_max=${SI_JOBS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
[[ $jobs_max =~ ^[1-9][0-9]*$ ]] || { echo "SI_JOBS=$jobs_max: not a count of jobs (1 or more)"; exit 2; }
# each section's header with the seconds since the start (to plan one-call device runs)
section() { echo "== $* [${SECONDS} s]"; }
# SI_COMMIT first: carried binaries name their commit, and the machine's git copy may be older
echo "commit: ${SI_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}  date: $(date -u +%F)" | tee "$LOG/build.log"
nvidia-smi >> "$LOG/build.log" 2>&1 || true

# host libraries from carried .deb files (tests/cuda/host_deps.sh sets PKGCONF_ARG)
. tests/cuda/host_deps.sh

BD=${SI_BIN_DIR:-build-cuda}
full=1
if [ -n "${SI_BIN_DIR:-}" ]; then
    echo "prebuilt binaries from $BD: $(ls "$BD" | tr '\n' ' ')" | tee -a "$LOG/build.log"
elif ! { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DSWIFTINFER_CUDA=ON \
         -DSWIFTINFER_TESTS=OFF $PKGCONF_ARG && cmake --build build-cuda -j "$(nproc)" \
         --target swiftinfer_cuda test_cuda_kernels $(cd tests/cuda && ls test_cuda_*.cu |
         sed 's/\.cu$//' | grep -v '^test_cuda_kernels$'); } >> "$LOG/build.log" 2>&1; then
    echo "cmake build failed (see build.log); falling back to nvcc" | tee -a "$LOG/build.log"
    full=0
    # the sm90a kernels (wgmma) as their own object: sm_90a machine code only, as CMake builds them
    nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -Isrc -c \
        -o "$BD/sm90a.o" src/backend/cuda/sm90a/gemm_rows64.cu >> "$LOG/build.log" 2>&1 ||
        { echo "BUILD FAILED"; tail -30 "$LOG/build.log"; exit 1; }
    nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Iinclude -Isrc -o "$BD/test_cuda_kernels" \
        tests/cuda/test_cuda_kernels.cu src/backend/cuda/*.cu "$BD/sm90a.o" src/quant/quant.c \
        src/quant/quant_float.c src/quant/quant_legacy.c src/quant/quant_k.c -lcublasLt -lm \
        >> "$LOG/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$LOG/build.log"; exit 1; }
fi
KTESTS=${SI_KTESTS:-$(cd "$BD" && ls test_cuda_* 2>/dev/null | grep -v '^test_cuda_model$' | grep -v '\.')}

# a check: a correctness-only run (a sanitizer, a knob's pass), its command line kept to run in
# the pool below; NAME names its log, $LOG/checks/NAME.log
declare -A check_cmd
check_names=()
check() { check_names+=("$1"); check_cmd[$1]=$2; }
# checks_start: the checks in the background, SI_JOBS at a time (default half the CPUs):
# compute-sanitizer's runs are bound by the host's CPU, no timing is taken while they run, and
# the model part's logits tests (at most 1 GiB of KV each) run beside them. checks_finish waits
# for them and reports each, before anything that sizes its KV pool from the GPU's free memory
# and before the bench.
checks_pid=
checks_start() {
    [ "${#check_names[@]}" -gt 0 ] || return 0
    local name
    section "${#check_names[@]} checks, $jobs_max at a time, in the background (logs in $LOG/checks/)"
    mkdir -p "$LOG/checks"
    (
        for name in "${check_names[@]}"; do
            while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
            # the shell's own stderr too into the log: a crash's "Aborted" line goes there (the
            # report shows it), not amid the model part's output
            {
                t0=$(date +%s)
                env ${check_cmd[$name]} > "$LOG/checks/$name.log" 2>&1
                echo "$? $(( $(date +%s) - t0 ))" > "$LOG/checks/$name.rc"
            } 2>> "$LOG/checks/$name.log" &
        done
        wait
    ) &
    checks_pid=$!
}
checks_finish() {
    [ -n "$checks_pid" ] || return 0
    wait "$checks_pid"
    checks_pid=
    section "the checks' results"
    local name cl rc secs
    for name in "${check_names[@]}"; do
        cl=$LOG/checks/$name.log rc=missing secs=?
        [ -f "$LOG/checks/$name.rc" ] && read -r rc secs < "$LOG/checks/$name.rc"
        echo "$name: rc=$rc, ${secs} s, $(grep -c '^PASS' "$cl" 2> /dev/null) PASS," \
            "$(grep -c '^FAIL' "$cl" 2> /dev/null) FAIL; $(tail -1 "$cl" 2> /dev/null)"
        [ "$rc" = 0 ] || { fail=1; echo "$name FAILED: ${check_cmd[$name]}"; grep -E "^FAIL" "$cl" | head -20; tail -5 "$cl"; }
    done
}

if [ "${SI_SKIP_KERNEL_TESTS:-0}" != 1 ]; then
    # each kernel test alone, with its timings (nothing else runs on the GPU meanwhile)
    for kt in $KTESTS; do
        section "$kt"
        "$BD/$kt" > "$LOG/$kt.log" 2>&1 || { fail=1; echo "$kt FAILED"; }
        grep -E "^(FAIL|==== summary)" "$LOG/$kt.log" | head -20
    done
    # racecheck first: the longest runs start first
    if [ "${SI_SANITIZE:-1}" = 1 ]; then
        for tool in racecheck memcheck; do
            for kt in $KTESTS; do
                # host code only, built with AddressSanitizer (which will not run under
                # compute-sanitizer)
                [ "$kt" = test_cuda_decoders ] && continue
                san="compute-sanitizer --tool $tool --error-exitcode 3"
                # racecheck did not finish the sampler's kernel at 8 CTAs a row (distributed
                # shared memory) in 100 s, twice (s32), nor at 16 in 240 s (s36); at 2 it finished
                # in about a minute (s36): it checks the one-CTA path and the cluster path at 2,
                # memcheck the 8
                if [ "$kt" = test_cuda_sample ] && [ $tool = racecheck ]; then
                    for c in 1 2; do
                        check "$kt-$tool-c$c" "SI_CUDA_SAMPLE_CLUSTER=$c $san $BD/$kt --small"
                    done
                else
                    check "$kt-$tool" "$san $BD/$kt --small"
                fi
            done
        done
    fi
    # the sampler at every cluster size (the checks above run 8 rows: 8 CTAs a row; 16 is taken
    # by up to 4 rows)
    if [ -x "$BD/test_cuda_sample" ]; then
        for c in 1 2 4 16; do
            check "sample-c$c" "SI_CUDA_SAMPLE_CLUSTER=$c $BD/test_cuda_sample --no-bench"
        done
    fi
    # the norm-inside GEMVs in two CTAs of 8 warps an SM, not one of 16
    # (SI_CUDA_GEMV_Q8X_NORM_WIDE=0)
    if [ -x "$BD/test_cuda_fused" ]; then
        check fused-narrow "SI_CUDA_GEMV_Q8X_NORM_WIDE=0 $BD/test_cuda_fused --no-bench"
    fi
    # the opt-in tensor-core F16/BF16 GEMV (SI_CUDA_GEMV_H16_MMA=1): its checks and sanitizers
    if [ -x "$BD/test_cuda_kernels" ]; then
        h16="SI_CUDA_GEMV_H16_MMA=1"
        check h16mma "$h16 $BD/test_cuda_kernels --gemv --no-bench --types f16,bf16"
        for tool in memcheck racecheck; do
            [ "${SI_SANITIZE:-1}" = 1 ] || continue
            check "h16mma-$tool" "$h16 compute-sanitizer --tool $tool --error-exitcode 3 \
                $BD/test_cuda_kernels --gemv --small --types f16,bf16"
        done
    fi
    # the general f32-x GEMV where gemv_direct.cuh takes the rows by default
    # (SI_CUDA_GEMV_DIRECT=0: the 32-element-block types at K % 128 != 0): its checks and
    # sanitizers
    if [ -x "$BD/test_cuda_kernels" ]; then
        gen="SI_CUDA_GEMV_DIRECT=0" q32=q4_0,q4_1,q5_0,q5_1,q8_0,iq4_nl
        check general "$gen $BD/test_cuda_kernels --gemv --no-bench --types $q32"
        for tool in memcheck racecheck; do
            [ "${SI_SANITIZE:-1}" = 1 ] || continue
            check "general-$tool" "$gen compute-sanitizer --tool $tool --error-exitcode 3 \
                $BD/test_cuda_kernels --gemv --small --types $q32"
        done
    fi
    # 9-16 rows with x in parts on every tensor-core launch (SI_CUDA_GEMV_TC_PARTS=2; by default
    # only x that does not fit whole, K = 11008 past 10-13 rows and 14336, from 12 rows, takes
    # them), and 9-10 rows with x's scales in 10-row rows on every launch
    # (SI_CUDA_GEMV_TC_COMPACT=1; by default only where 16-row ones do not fit: K = 14336): the GEMV
    # checks, x quantised ahead, and the sanitizers (--small has a 16 x 4096 shape for them)
    if [ -x "$BD/test_cuda_kernels" ] && [ -x "$BD/test_cuda_fused" ]; then
        for cfg in parts:SI_CUDA_GEMV_TC_PARTS=2 compact:SI_CUDA_GEMV_TC_COMPACT=1; do
            name=${cfg%%:*} knob=${cfg#*:}
            check "$name" "$knob $BD/test_cuda_kernels --gemv --no-bench"
            check "$name-fused" "$knob $BD/test_cuda_fused --no-bench"
            for tool in memcheck racecheck; do
                [ "${SI_SANITIZE:-1}" = 1 ] || continue
                check "$name-$tool" "$knob compute-sanitizer --tool $tool --error-exitcode 3 \
                    $BD/test_cuda_kernels --gemv --small"
            done
        done
    fi
    checks_start
fi

# ---- the whole model on the GPU ----------------------------------------------------------------
if [ "$full" = 1 ] && [ -z "${SI_BIN_DIR:-}" ] && ! cmake --build build-cuda -j "$(nproc)" \
        --target swiftinfer-cli swiftinfer_shared test_cuda_model >> "$LOG/build.log" 2>&1; then
    echo "full project build FAILED"; tail -30 "$LOG/build.log"; full=0; fail=1
fi
[ "${SI_SKIP_MODEL:-0}" = 1 ] && full=0
if [ "$full" = 1 ]; then
    SI=$BD/swiftinfer
    MD=${SI_MODELS_DIR:-/tmp/si_models}
    mkdir -p "$MD"
    # name:shape:type:logits tolerance (max |gpu - cpu| / max |cpu|; 0: no logits test)
    specs="tiny-f16:tiny:f16:1e-2 tiny-qwen2-f16:tiny-qwen2:f16:1e-2 smollm2-f16:smollm2-135m:f16:1e-2
           smollm2-q8_0:smollm2-135m:q8_0:5e-2 smollm2-q4_0:smollm2-135m:q4_0:5e-2
           smollm2-q4_1:smollm2-135m:q4_1:5e-2
           tiny-q8_0:tiny:q8_0:5e-2 tiny-q4_0:tiny:q4_0:5e-2 tiny-q4_1:tiny:q4_1:5e-2 tiny-q4_k:tiny:q4_k:5e-2
           tiny-q4_k_m:tiny:q4_k_m:5e-2 tiny-q5_0:tiny:q5_0:5e-2 tiny-q5_1:tiny:q5_1:5e-2
           tiny-q5_k:tiny:q5_k:5e-2 tiny-q5_k_m:tiny:q5_k_m:5e-2 tiny-q6_k:tiny:q6_k:5e-2
           tiny-q2_k:tiny:q2_k:5e-2
           tiny-q3_k:tiny:q3_k:5e-2 tiny-q3_k_m:tiny:q3_k_m:5e-2 tiny-iq4_nl:tiny:iq4_nl:5e-2
           tiny-iq4_xs:tiny:iq4_xs:5e-2"
    [ "${SI_SYNTH_7B:-0}" = 1 ] && specs="$specs llama2-7b-q4_0:llama2-7b:q4_0:0"
    specs="$specs ${SI_EXTRA_MODELS:-}" # more name:shape:type:tol, e.g. tinyllama-q4_0:tinyllama-1.1b:q4_0:0
    bench_models=""
    section "synth + test_cuda_model"
    for sp in $specs; do
        IFS=: read -r name shape type tol <<< "$sp"
        f=$MD/$name.gguf
        [ -f "$f" ] || "$SI" synth -o "$f" --shape "$shape" --type "$type" >> "$LOG/build.log" 2>&1 \
            || { echo "synth $name FAILED"; fail=1; continue; }
        case $name in tiny-*) ;; *) bench_models="$bench_models,$f" ;; esac
        [ "$tol" = 0 ] && continue
        "$BD/test_cuda_model" "$f" "$tol" >> "$LOG/test_cuda_model.log" 2>&1 \
            || { fail=1; echo "test_cuda_model $name FAILED"; }
        case $name in # F16 again with the opt-in tensor-core GEMV
        *-f16) SI_CUDA_GEMV_H16_MMA=1 "$BD/test_cuda_model" "$f" "$tol" \
                   >> "$LOG/test_cuda_model.log" 2>&1 \
                   || { fail=1; echo "test_cuda_model $name SI_CUDA_GEMV_H16_MMA=1 FAILED"; } ;;
        # the gate/up GEMV ending in SwiGLU, which the tiny shape's dealing rule leaves out
        tiny-q4_0 | tiny-q8_0 | tiny-q4_k | tiny-q6_k)
            SI_CUDA_GEMV_GLU=2 "$BD/test_cuda_model" "$f" "$tol" >> "$LOG/test_cuda_model.log" 2>&1 \
                || { fail=1; echo "test_cuda_model $name SI_CUDA_GEMV_GLU=2 FAILED"; } ;;
        esac
    done
    checks_finish
    section "CLI smoke (run --device cuda, --parallel, --gpu-memory-fraction)"
    {
        sm=$MD/smollm2-q8_0.gguf
        "$SI" run -m "$sm" --device cuda -p "Hello" -n 16 --greedy --print-ids; echo "rc=$?"
        "$SI" run -m "$sm" --device cpu -p "Hello" -n 16 --greedy --print-ids; echo "rc=$?"
        "$SI" run -m "$sm" --device cuda -p "Hello" -n 16 --greedy --parallel 4 \
            --gpu-memory-fraction 0.5; echo "rc=$?"
        "$SI" run -m "$sm" --device cuda -p "Hello" -n 4 --parallel 2 --gpu-memory-fraction 0.001
        echo "rc=$? (expected: a clear 'does not fit' error)"
    } > "$LOG/run_smoke.log" 2>&1
    grep -E "ready in|rc=|does not fit" "$LOG/run_smoke.log"
    section "Python API, device=\"cuda\" against \"cpu\" (tests/cuda/python_api_gpu.py)"
    if [ -f "$BD/libswiftinfer.so" ] && command -v python3 > /dev/null; then
        for sp in smollm2-f16:0.01 smollm2-q4_0:0.05; do # model:logprob tolerance (nats)
            name=${sp%:*}
            SWIFTINFER_LIB=$BD/libswiftinfer.so PYTHONPATH=python timeout 300 python3 \
                tests/cuda/python_api_gpu.py "$MD/$name.gguf" "${sp#*:}" \
                > "$LOG/python_api_$name.log" 2>&1 \
                || { fail=1; echo "python_api_gpu $name FAILED"; }
            sed "s/^/$name: /" "$LOG/python_api_$name.log" | grep -v "^$name: *$" | tail -8
        done
    else # a check that did not run is not a pass
        fail=1
        echo "python_api_gpu FAILED to run: no $BD/libswiftinfer.so (carry it with the binaries) or python3"
    fi
    section "serve --device cuda: the KV pool's GPU default, one completion, logit_bias and penalties on the device (tests/cuda/serve_gpu.py)"
    if command -v python3 > /dev/null; then
        timeout 400 python3 tests/cuda/serve_gpu.py "$SI" "$MD/smollm2-q8_0.gguf" \
            > "$LOG/run_smoke_serve.log" 2>&1 || { fail=1; echo "serve_gpu FAILED"; }
        cat "$LOG/run_smoke_serve.log"
    else
        fail=1
        echo "serve_gpu FAILED to run: no python3"
    fi
    section "bench --device cuda -p 512 -n 128"
    "$SI" bench --device cuda --bw 4210 -p 512 -n 128 -m "${bench_models#,}" > "$LOG/bench.log" 2>&1 \
        || { fail=1; echo "bench FAILED"; }
    grep -E "^(PASS|FAIL|INFO|==)" "$LOG/test_cuda_model.log"
    grep -E "weights uploaded|ready in" "$LOG/bench.log" | head -8
    grep -v "^bench: loading\|uploading weights" "$LOG/bench.log" | tail -14
fi

checks_finish # where the model part did not run

# the short tables last (the GPU tool returns the end of the output)
for kt in $KTESTS; do
    [ -f "$LOG/$kt.log" ] || continue
    section "$kt"
    grep -E "^FAIL" "$LOG/$kt.log" | head -40
    sed -n '/==== timings/,$p' "$LOG/$kt.log" | head -80
    grep -E "^==== summary" "$LOG/$kt.log"
done
# the kernel timings against the newest run.sh logs saved in bench/ (SI_TIMING_BASE=DIR: against
# DIR): a report of what moved by 10 % or more, not a test (scripts/timing_diff.py)
base=${SI_TIMING_BASE:-$(ls -d bench/gpu-*/call*/runsh/test_cuda_kernels.log 2> /dev/null |
    sort -V | tail -1)}
base=${base%/test_cuda_kernels.log}
if [ -n "$base" ] && [ -d "$base" ] && command -v python3 > /dev/null; then
    section "kernel timings against $base"
    python3 scripts/timing_diff.py "$base" "$LOG" --top 12 | tee "$LOG/timing_diff.txt" || true
fi
[ "$fail" = 0 ] && echo "RUN.SH: ALL PASSED" || echo "RUN.SH: FAILURES"
exit "$fail"
