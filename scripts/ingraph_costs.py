#!/usr/bin/env python3
"""ingraph_costs.py TG.TXT — what each kernel of a batch-1 decode step costs inside the graphed,
PDL-chained step, from the tg128 lines that scripts/gpu_decode_ab.sh writes when its settings are
SI_CUDA_SKIP masks (the CUDA backend's profiling knob: the masked launches are left out of every
layer, the outputs are then garbage):

  SI_BIN_DIR=build-gpucarry AB_TYPES="f16 q8_0 q4_0" AB_ENVS="SI_CUDA_SKIP=0 SI_CUDA_SKIP=33 \\
    SI_CUDA_SKIP=4 SI_CUDA_SKIP=8 SI_CUDA_SKIP=128 SI_CUDA_SKIP=173 SI_CUDA_SKIP=2 \\
    SI_CUDA_SKIP=16 SI_CUDA_SKIP=64 SI_CUDA_SKIP=256 SI_CUDA_SKIP=338" scripts/gpu_decode_ab.sh
  python3 scripts/ingraph_costs.py $OUT/ab/tg.txt [--bw GBPS]

For each type and mask: the tg128 rate (mean of the rounds) and the time a token saves without
those launches, per layer (per norm for mask 33, which drops both); for the single GEMVs also the
bandwidth that time implies for Llama-2-7B's matrix, as a share of the H200's 4,210 GB/s or of
--bw GBPS (the copy bandwidth `swiftinfer bench` measured on the machine that ran it; a share
above 100 % means the kernel overlaps its neighbours). ncu, which times kernels one at a time,
cannot show this: the overlap between neighbours is what is measured here."""
import re
import sys
from collections import defaultdict

LAYERS = 32  # Llama-2-7B
# SI_CUDA_SKIP bits (cuda_backend.c: skip()) and what each mask here leaves out
NAMES = {33: "both norms (each)", 1: "attention norm", 32: "FFN norm", 4: "RoPE + KV write",
         8: "attention", 12: "RoPE + attention", 128: "SwiGLU",
         173: "all five small kernels", 2: "QKV GEMV", 16: "output projection GEMV",
         64: "gate/up GEMV", 256: "down GEMV", 338: "all four GEMVs",
         192: "gate/up GEMV + SwiGLU", 466: "all four GEMVs + SwiGLU"}
# (with the GEMV ending in SwiGLU, SI_CUDA_GEMV_GLU, mask 64 alone puts the SwiGLU kernel back)
GEMV_ELEMS = {2: 12288 * 4096, 16: 4096 * 4096, 64: 22016 * 4096, 192: 22016 * 4096,
              256: 4096 * 11008}
BYTES_PER_ELEM = {"f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32,
                  "q4_k": 144 / 256, "q6_k": 210 / 256}
BW_GBS = 4210.0  # the H200's measured copy bandwidth (--bw GBPS: another machine's)


def main():
    args = sys.argv[1:]
    bw_gbs = BW_GBS
    if len(args) == 3 and args[1] == "--bw":
        try:
            bw_gbs = float(args[2])
        except ValueError:
            bw_gbs = 0.0
        if not bw_gbs > 0:
            sys.exit(f"--bw {args[2]}: not a bandwidth in GB/s (a number above 0)")
    elif len(args) != 1:
        sys.exit(__doc__)
    rates = defaultdict(list)
    line_re = re.compile(r"round \d+ (\S+) \S+ SI_CUDA_SKIP=(\d+):.*\| tg128 \| ([0-9.]+)")
    with open(sys.argv[1]) as f:
        for line in f:
            m = line_re.search(line)
            if m:
                rates[(m.group(1), int(m.group(2)))].append(float(m.group(3)))
    types = sorted({t for t, _ in rates}, key=lambda t: list(BYTES_PER_ELEM).index(t)
                   if t in BYTES_PER_ELEM else 99)
    if not types:
        sys.exit(f"{sys.argv[1]}: no 'SI_CUDA_SKIP=' tg128 lines")
    for t in types:
        if (t, 0) not in rates:
            print(f"{t}: no SI_CUDA_SKIP=0 baseline, skipped")
            continue
        base = sum(rates[(t, 0)]) / len(rates[(t, 0)])
        base_ms = 1000.0 / base
        print(f"{t}: {base:.1f} t/s, {base_ms:.3f} ms a token")
        for mask in sorted(k for tt, k in rates if tt == t and k != 0):
            r = sum(rates[(t, mask)]) / len(rates[(t, mask)])
            saved_ms = base_ms - 1000.0 / r
            per_us = saved_ms * 1000.0 / LAYERS / (2 if mask == 33 else 1)
            line = (f"  {NAMES.get(mask, f'mask {mask}'):<28} {r:8.1f} t/s  "
                    f"saves {saved_ms:6.3f} ms a token, {per_us:5.1f} us a layer")
            if mask in GEMV_ELEMS and t in BYTES_PER_ELEM and per_us > 0:
                b = GEMV_ELEMS[mask] * BYTES_PER_ELEM[t]
                frac = b / (per_us * 1e-6) / (bw_gbs * 1e9)
                line += f"  ({b / 1e6:.1f} MB: {100 * frac:.0f}% of {bw_gbs / 1000:.2f} TB/s)"
            print(line)


if __name__ == "__main__":
    main()
