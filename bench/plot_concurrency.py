#!/usr/bin/env python3
"""plot_concurrency.py LOG PNG — decode rate against concurrent requests for each setting of a
switch, from a device log whose lines look like

    r1 mma=0 tg:  ... tg128   259.53 ± 9.71
    r1 mma=0 c4: | f16.gguf | 16 | 4 | 128 | 128 | 556.55 | 141.89 | 566.73 | 0.023 | 0.92 |

(`swiftinfer bench` tg128 for one request, its table row or just "tg128 N"; `--concurrency C`
rows, whose 8th column is the all-decoding rate), as scripts/gpu_concurrency_ab.sh writes them
(bench/gpu-2026-12-01-s14/call8-h16mma-final/engine.txt came from the same loop typed inline).
Rounds of the same setting are averaged; the bars show their range."""
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"0": "FMA GEMV (default)", "1": "tensor-core GEMV (SI_CUDA_GEMV_H16_MMA=1)"}


def parse(path):
    """{setting: {concurrency: [t/s, ...]}}"""
    rates = defaultdict(lambda: defaultdict(list))
    tg_of = None  # the setting whose tg128 line may follow (the bench prints blank lines first)
    for line in open(path, encoding="utf-8"):
        m = re.match(r"r\d+ (\w+)=(\S+) (tg|c(\d+)):(.*)", line)
        t = re.search(r"tg128[\s|]+([\d.]+)", line)
        if t and (m or tg_of):
            rates[m.group(2) if m else tg_of][1].append(float(t.group(1)))
            tg_of = None
        elif m and m.group(3) == "tg":
            tg_of = m.group(2)
        elif m:
            cols = [c.strip() for c in m.group(5).split("|")]  # '' | model | ... | all-decoding
            if len(cols) > 8:
                rates[m.group(2)][int(m.group(4))].append(float(cols[8]))
    return rates


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_concurrency.py LOG PNG")
    rates = parse(sys.argv[1])
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, setting in enumerate(sorted(rates)):
        cs = sorted(rates[setting])
        mean = [sum(rates[setting][c]) / len(rates[setting][c]) for c in cs]
        lo = [m - min(rates[setting][c]) for m, c in zip(mean, cs)]
        hi = [max(rates[setting][c]) - m for m, c in zip(mean, cs)]
        ax.errorbar(cs, mean, yerr=[lo, hi], marker="o", capsize=3,
                    label=LABELS.get(setting, setting))
        for c, m in zip(cs, mean):
            ax.annotate(f"{m:,.0f}", (c, m), textcoords="offset points",
                        xytext=(4, 6 if i % 2 == 0 else -12), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 2, 4, 8], ["1 (tg128)", "2", "4", "8"])
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("decode tokens/s, all requests")
    ax.set_title("Llama-2-7B F16 on one H200: decode GEMV of 1-8 rows")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
