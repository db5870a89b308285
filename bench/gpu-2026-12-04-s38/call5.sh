#!/usr/bin/env bash
# s38 device call 5: the session's step ahead with penalties (the fed token counted on the
# device). test_cuda_sample whole without timings (rows with a fed token), memcheck on --small;
# `run` with --repeat-penalty 1.1 (t 0.8), SI_SESSION_AHEAD=0 and on, Llama-2-7B Q4_0 and
# SmolLM2-135M Q8_0, 2 rounds, the ids of both compared; the model part of run.sh.
set -u
B=build-gpucarry
S=$(date +%s)
timeout 120 $B/test_cuda_sample --no-bench > "$OUT/sample.txt" 2>&1; echo "test_cuda_sample rc=$?" | tee -a "$OUT/sample.txt"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $B/test_cuda_sample --small > "$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?" | tee -a "$OUT/memcheck.txt"
grep -hE "^(FAIL|PASS penalties)|TEST_CUDA|ERROR SUMMARY" "$OUT/sample.txt" "$OUT/memcheck.txt" | cut -c1-250
$B/swiftinfer synth -o /dev/shm/llama2-7b.gguf --shape llama2-7b --type q4_0 > /dev/null 2>&1
$B/swiftinfer synth -o /dev/shm/smollm2.gguf --shape smollm2-135m --type q8_0 > /dev/null 2>&1
{
for m in llama2-7b smollm2; do for r in 1 2; do for a in 0 1; do
  echo "$m run --repeat-penalty 1.1 SI_SESSION_AHEAD=$a round $r: $(SI_SESSION_AHEAD=$a $B/swiftinfer run --device cuda -m /dev/shm/$m.gguf \
      -p 'Hello there' -n 256 --ignore-eos --seed 1 --temp 0.8 --repeat-penalty 1.1 --frequency-penalty 0.2 \
      2>&1 >/tmp/run-$m-$r-$a.txt | grep -E 'generation|tokens/s' | tail -1)"
done; echo "  texts: $(md5sum < /tmp/run-$m-$r-0.txt | cut -c1-12) (off) $(md5sum < /tmp/run-$m-$r-1.txt | cut -c1-12) (ahead)"
done; done
} | tee "$OUT/run_ahead_penalty.txt"
rm -f /dev/shm/*.gguf
echo "bench part: $(( $(date +%s) - S )) s"
OUT=/tmp/rs SI_BIN_DIR=$B SI_SKIP_KERNEL_TESTS=1 timeout 400 tests/cuda/run.sh > "$OUT/runsh.txt" 2>&1
echo "run.sh rc=$? after $(( $(date +%s) - S )) s"
echo "PASS lines: $(grep -cE '^PASS' "$OUT/runsh.txt")"
grep -E "^FAIL|FAILED|RUN.SH|PYAPI" "$OUT/runsh.txt" | cut -c1-300 | head -20
grep -h "session sampling on the gpu (t 1.0 penalties\|session sampling on the gpu (t 1.0 the same" /tmp/rs/test_cuda_model.log | cut -c1-250 | sort | uniq -c
cp /tmp/rs/test_cuda_model.log "$OUT/"
