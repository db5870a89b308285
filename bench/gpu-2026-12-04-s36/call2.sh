#!/usr/bin/env bash
# s36 device call 2: where a sampled row's time goes (ncu on the sampler kernel), 128256 entries,
# one row (cluster of 8): launch 210 of `--time-only` is t 0.8 top-p 0.95 over spread rows,
# launch 315 t 1.0 alone (whole vocabulary). prof-test_cuda_sample: 2dfc32e's sample.cu with
# -lineinfo, built by nvcc directly.
set -u
B=build-gpucarry
for skip in 210 315; do
  ncu --clock-control none --set full -k regex:sample_kernel --launch-skip $skip --launch-count 1 \
      --import-source yes -o /tmp/p$skip $B/prof-test_cuda_sample --time-only > /tmp/ncu$skip.log 2>&1
  tail -3 /tmp/ncu$skip.log
  ncu -i /tmp/p$skip.ncu-rep --page details > "$OUT/details$skip.txt" 2>&1
  ncu -i /tmp/p$skip.ncu-rep --page source --csv --print-source cuda > "$OUT/source$skip.csv" 2>&1
  ncu -i /tmp/p$skip.ncu-rep --page source --csv --print-source sass > /tmp/sass$skip.csv 2>&1
  xz -9 < /tmp/sass$skip.csv > "$OUT/sass$skip.csv.xz"
  grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc" "$OUT/details$skip.txt"
done
