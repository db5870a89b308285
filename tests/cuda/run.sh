#!/usr/bin/env bash
# tests/cuda/run.sh — the CUDA kernel tests on the GPU machine, in one call:
#   1. configure + build (Release, SWIFTINFER_CUDA=ON) in build-cuda (falls back to plain nvcc
#      when the host libraries the full project needs, e.g. PCRE2, are missing there);
#   2. test_cuda_kernels: every kernel vs the CPU reference, then timings;
#   3. test_cuda_kernels --small under compute-sanitizer memcheck and racecheck
#      (SI_SKIP_KERNEL_TESTS=1 skips 2 and 3);
#   4. the whole model on the GPU: the full project (swiftinfer CLI, test_cuda_model) built with
#      CUDA, synthetic models written by `swiftinfer synth` (tiny, tiny-qwen2, smollm2-135m in
#      f16/q8_0/q4_0; llama2-7b q4_0 with SI_SYNTH_7B=1; more with SI_EXTRA_MODELS), whole-model logits GPU vs CPU and the
#      engine's exactness on the GPU (test_cuda_model), a CLI smoke run, then
#      `swiftinfer bench --device cuda -p 512 -n 128` on every synthesised model.
# The host libraries the full project needs (PCRE2, utf8proc, jansson, libmicrohttpd, xxhash,
# cmocka) are missing on the GPU image: when .debs/ holds their Debian packages (carried; see
# tests/cuda/LAST_RUN.md) they are unpacked into /tmp/deps, never into /.
# Logs go to ${OUT:-/tmp}/ (at most 8 files: the device tool's limit). Exit status non-zero on
# any failure.
set -u -o pipefail
cd "$(dirname "$0")/../.."
LOG=${OUT:-/tmp}
mkdir -p "$LOG" build-cuda
fail=0
nvidia-smi > "$LOG/nvidia-smi.txt" 2>&1 || true
echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo "${SI_COMMIT:-unknown}")  date: $(date -u +%F)" | tee "$LOG/build.log"

# host libraries from carried .deb files (dpkg -x into /tmp/deps, pointed at by the env)
PKGCONF_ARG=""
if [ -d .debs ] && ! pkg-config --exists libpcre2-8 2>/dev/null; then
    DEPS=/tmp/deps
    mkdir -p "$DEPS"
    for f in .debs/*.deb; do dpkg -x "$f" "$DEPS"; done
    # libmicrohttpd.pc names gnutls as a private requirement, whose .pc is not there: drop it
    # (only the .so's own DT_NEEDED matters, and the GPU image has libgnutls)
    sed -i '/^Requires.private/d' "$DEPS"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
    ML=$DEPS/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_PATH=$ML/pkgconfig:$DEPS/usr/share/pkgconfig
    export PKG_CONFIG_SYSROOT_DIR=$DEPS PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
    export CPATH=$DEPS/usr/include${CPATH:+:$CPATH} LIBRARY_PATH=$ML${LIBRARY_PATH:+:$LIBRARY_PATH}
    export LD_LIBRARY_PATH=$ML${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    command -v pkg-config > /dev/null || PKGCONF_ARG="-DPKG_CONFIG_EXECUTABLE=$DEPS/usr/bin/pkgconf"
    echo "host libraries unpacked from .debs into $DEPS" | tee -a "$LOG/build.log"
fi

BIN=build-cuda/test_cuda_kernels
full=1
if ! { cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DSWIFTINFER_CUDA=ON \
         -DSWIFTINFER_TESTS=OFF $PKGCONF_ARG && cmake --build build-cuda -j "$(nproc)" --target test_cuda_kernels; } \
       >> "$LOG/build.log" 2>&1; then
    echo "cmake build failed (see build.log); falling back to nvcc" | tee -a "$LOG/build.log"
    full=0
    nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -Iinclude -Isrc -o "$BIN" \
        tests/cuda/test_cuda_kernels.cu src/backend/cuda/*.cu src/quant/quant.c \
        src/quant/quant_float.c src/quant/quant_legacy.c src/quant/quant_k.c -lcublasLt -lm \
        >> "$LOG/build.log" 2>&1 || { echo "BUILD FAILED"; tail -30 "$LOG/build.log"; exit 1; }
fi

if [ "${SI_SKIP_KERNEL_TESTS:-0}" != 1 ]; then
    echo "== test_cuda_kernels"
    "$BIN" > "$LOG/test_cuda_kernels.log" 2>&1 || { fail=1; echo "test_cuda_kernels FAILED"; }
    echo "== memcheck (--small)"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN" --small > "$LOG/memcheck.log" 2>&1 \
        || { fail=1; echo "memcheck FAILED"; }
    tail -3 "$LOG/memcheck.log"
    echo "== racecheck (--small)"
    compute-sanitizer --tool racecheck --error-exitcode 3 "$BIN" --small > "$LOG/racecheck.log" 2>&1 \
        || { fail=1; echo "racecheck FAILED"; }
    tail -3 "$LOG/racecheck.log"
fi

# ---- the whole model on the GPU ----------------------------------------------------------------
if [ "$full" = 1 ] && ! cmake --build build-cuda -j "$(nproc)" --target swiftinfer-cli test_cuda_model \
        >> "$LOG/build.log" 2>&1; then
    echo "full project build FAILED"; tail -30 "$LOG/build.log"; full=0; fail=1
fi
if [ "$full" = 1 ]; then
    SI=build-cuda/swiftinfer
    MD=${SI_MODELS_DIR:-/tmp/si_models}
    mkdir -p "$MD"
    # name:shape:type:logits tolerance (max |gpu - cpu| / max |cpu|; 0: no logits test)
    specs="tiny-f16:tiny:f16:1e-2 tiny-qwen2-f16:tiny-qwen2:f16:1e-2 smollm2-f16:smollm2-135m:f16:1e-2
           smollm2-q8_0:smollm2-135m:q8_0:5e-2 smollm2-q4_0:smollm2-135m:q4_0:5e-2"
    [ "${SI_SYNTH_7B:-0}" = 1 ] && specs="$specs llama2-7b-q4_0:llama2-7b:q4_0:0"
    specs="$specs ${SI_EXTRA_MODELS:-}" # more name:shape:type:tol, e.g. tinyllama-q4_0:tinyllama-1.1b:q4_0:0
    bench_models=""
    echo "== synth + test_cuda_model"
    for sp in $specs; do
        IFS=: read -r name shape type tol <<< "$sp"
        f=$MD/$name.gguf
        [ -f "$f" ] || "$SI" synth -o "$f" --shape "$shape" --type "$type" >> "$LOG/build.log" 2>&1 \
            || { echo "synth $name FAILED"; fail=1; continue; }
        case $name in tiny-f16|tiny-qwen2*) ;; *) bench_models="$bench_models,$f" ;; esac
        [ "$tol" = 0 ] && continue
        build-cuda/test_cuda_model "$f" "$tol" >> "$LOG/test_cuda_model.log" 2>&1 \
            || { fail=1; echo "test_cuda_model $name FAILED"; }
    done
    echo "== CLI smoke (run --device cuda, --parallel, --gpu-memory-fraction)"
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
    echo "== bench --device cuda -p 512 -n 128"
    "$SI" bench --device cuda --bw 4210 -p 512 -n 128 -m "${bench_models#,}" > "$LOG/bench.log" 2>&1 \
        || { fail=1; echo "bench FAILED"; }
    grep -E "^(PASS|FAIL|INFO|==)" "$LOG/test_cuda_model.log"
    grep -E "weights uploaded|ready in" "$LOG/bench.log" | head -8
    grep -v "^bench: loading\|uploading weights" "$LOG/bench.log" | tail -14
fi


# the short table last (the GPU tool returns the end of the output)
if [ -f "$LOG/test_cuda_kernels.log" ]; then
    grep -E "^FAIL" "$LOG/test_cuda_kernels.log" | head -40
    sed -n '/==== timings/,$p' "$LOG/test_cuda_kernels.log"
    grep -E "^==== summary" "$LOG/test_cuda_kernels.log"
fi
[ "$fail" = 0 ] && echo "RUN.SH: ALL PASSED" || echo "RUN.SH: FAILURES"
exit "$fail"
