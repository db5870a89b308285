#!/usr/bin/env python3
"""plot_run_parallel.py LOG PNG [--title T] [--label BIN=TEXT ...] — `run --parallel N` rates
against N, a line per (model, binary), from device logs whose lines look like

    llama3-8b --parallel 8 --repeat-penalty 1.1 swiftinfer round 1: 8 requests: ... = 1520.8 tokens/s; ...
    llama3-8b --parallel 64 no penalty: 64 requests: ... = 7941.5 tokens/s; ...

(bench/gpu-2026-12-04-s37/call7.sh writes them). Rounds are averaged; the bars show their range.
A "no penalty" line is drawn as a single marker per model."""
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"^(\S+) --parallel (\d+) (.*?): (\d+) requests: .*= ([\d.]+) tokens/s")


def parse(path):
    """{(model, setting): {requests: [t/s, ...]}}"""
    rates = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            model, n, rest, _, ts = m.groups()
            setting = re.sub(r"\s*round \d+$", "", rest)
            rates[(model, setting)][int(n)].append(float(ts))
    return rates


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    log, png, title, labels = argv[1], argv[2], None, {}
    rest = argv[3:]
    while rest:
        if rest[0] == "--title" and len(rest) > 1:
            title, rest = rest[1], rest[2:]
        elif rest[0] == "--label" and len(rest) > 1:
            key, _, text = rest[1].partition("=")
            labels[key], rest = text, rest[2:]
        else:
            sys.exit(f"unknown argument {rest[0]}\n{__doc__}")
    rates = parse(log)
    if not rates:
        sys.exit(f"no `run --parallel` lines in {log}")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (model, setting), by_n in sorted(rates.items()):
        ns = sorted(by_n)
        mean = [sum(by_n[n]) / len(by_n[n]) for n in ns]
        lo = [m - min(by_n[n]) for m, n in zip(mean, ns)]
        hi = [max(by_n[n]) - m for m, n in zip(mean, ns)]
        name = setting.split()[-1] if setting.split() else setting
        text = labels.get(name, setting)
        ax.errorbar(ns, mean, yerr=[lo, hi], marker="o", capsize=3, label=f"{model}: {text}",
                    linestyle="none" if len(ns) == 1 else "-")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests (run --parallel N)")
    ax.set_ylabel("generated tokens/s (prefill included)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main(sys.argv)
