#!/usr/bin/env bash
# s37 device call 8: the model part of run.sh on the session's final code (the thread pool's
# turns, test_engine's new check), and `run --parallel 64 --repeat-penalty 1.1` once.
set -u
B=build-gpucarry
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | head -30
$B/swiftinfer synth -o /dev/shm/llama3-8b.gguf --shape llama3-8b --type q4_0 > /dev/null 2>&1
echo "llama3-8b --parallel 64 --repeat-penalty 1.1: $($B/swiftinfer run --device cuda -m /dev/shm/llama3-8b.gguf \
    -p 'Hello there' -n 128 --ignore-eos --seed 1 --temp 0.8 --repeat-penalty 1.1 --parallel 64 \
    --gpu-memory-fraction 0.5 2>&1 >/dev/null | grep 'tokens generated')" | tee "$OUT/run_penalty.txt"
