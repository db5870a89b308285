#!/usr/bin/env python3
"""plot_concurrency.py LOG[,LOG...] PNG [--title T] [--label SETTING=TEXT ...] — decode rate
against concurrent requests for each setting of a switch, from device logs whose lines look like

    r1 mma=0 tg:  ... tg128   259.53 ± 9.71
    r1 mma=0 c4: | f16.gguf | 16 | 4 | 128 | 128 | 556.55 | 141.89 | 566.73 | 0.023 | 0.92 |

(`swiftinfer bench` tg128 for one request, its table row or just "tg128 N"; `--concurrency C`
rows, whose 8th column is the all-decoding rate), as scripts/gpu_concurrency_ab.sh writes them
(bench/gpu-2026-12-01-s14/call8-h16mma-final/engine.txt came from the same loop typed inline).
Rounds of the same setting are averaged; the bars show their range. One request is the `c1`
rows where the log has them (the engine at the log's prompt length), else tg128. Several logs
(comma-separated, e.g. one per weight type) are drawn side by side, each titled by its file's
name, at most three to a row, a setting in the same colour in every panel; --label names a
setting (the text after the round, e.g. SI_CUDA_ATTN_PART=1024).
Or, instead of LOGs, `--json SETTING=FILE` (repeated; a setting's files are its rounds): the
output of `swiftinfer bench -c C1,C2,... --json`, one panel."""
import json
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LABELS = {"mma=0": "FMA GEMV (default)", "mma=1": "tensor-core GEMV (SI_CUDA_GEMV_H16_MMA=1)"}


def parse(path):
    """{setting: {concurrency: [t/s, ...]}}"""
    rates = defaultdict(lambda: defaultdict(list))
    tg = defaultdict(list)
    tg_of = None  # the setting whose tg128 line may follow (the bench prints blank lines first)
    for line in open(path, encoding="utf-8"):
        m = re.match(r"r\d+ (\w+=\S+) (tg|c(\d+)):(.*)", line)
        t = re.search(r"tg128[\s|]+([\d.]+)", line)
        if t and (m or tg_of):
            tg[m.group(1) if m else tg_of].append(float(t.group(1)))
            tg_of = None
        elif m and m.group(2) == "tg":
            tg_of = m.group(1)
        elif m:
            cols = [c.strip() for c in m.group(4).split("|")]  # '' | model | ... | all-decoding
            if len(cols) > 8:
                rates[m.group(1)][int(m.group(3))].append(float(cols[8]))
    for setting, values in tg.items():
        if 1 not in rates[setting]:
            rates[setting][1] = values
    return rates


def parse_json(args):
    """{setting: {concurrency: [t/s, ...]}} from SETTING=FILE arguments"""
    rates = defaultdict(lambda: defaultdict(list))
    for arg in args:
        setting, _, path = arg.partition("=")
        with open(path, encoding="utf-8") as f:
            for row in json.load(f):
                rates[setting][int(row["concurrency"])].append(float(row["all_decoding_tps"]))
    return rates


def setting_colours(panels):
    """{setting: matplotlib colour}, one per setting of any panel: the same in every panel"""
    settings = sorted({s for rates in panels for s in rates})
    return {s: f"C{i % 10}" for i, s in enumerate(settings)}


def draw(ax, rates, labels, title, colours):
    for i, setting in enumerate(sorted(rates)):
        cs = sorted(rates[setting])
        mean = [sum(rates[setting][c]) / len(rates[setting][c]) for c in cs]
        lo = [m - min(rates[setting][c]) for m, c in zip(mean, cs)]
        hi = [max(rates[setting][c]) - m for m, c in zip(mean, cs)]
        bars = ax.errorbar(cs, mean, yerr=[lo, hi], marker="o", capsize=3,
                           label=labels.get(setting, setting), color=colours[setting])
        for c, m in zip(cs, mean):  # in the line's colour: which label is whose stays clear
            ax.annotate(f"{m:,.0f}", (c, m), textcoords="offset points", fontsize=8,
                        xytext=(4, 6 if i % 2 == 0 else -12), color=bars.lines[0].get_color())
    ax.set_xscale("log", base=2)
    ticks = sorted({c for r in rates.values() for c in r})
    ax.set_xticks(ticks, [str(c) for c in ticks])
    ax.set_xlabel("concurrent requests")
    ax.set_ylabel("decode tokens/s, all requests")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def main():
    args = sys.argv[1:]
    title, labels, pos = "Llama-2-7B F16 on one H200: decode GEMV of 1-8 rows", dict(LABELS), []
    json_args = []
    while args:
        a = args.pop(0)
        if a == "--title" and args:
            title = args.pop(0)
        elif a == "--json" and args and "=" in args[0]:
            json_args.append(args.pop(0))
        elif a == "--label" and args and "=" in args[0]:
            key, _, text = args.pop(0).rpartition("=")
            labels[key] = text
        else:
            pos.append(a)
    if len(pos) != (1 if json_args else 2):
        sys.exit("usage: plot_concurrency.py {LOG[,LOG...] | --json SETTING=FILE ...} PNG "
                 "[--title T] [--label SETTING=TEXT ...]")
    logs = [None] if json_args else pos.pop(0).split(",")
    panels = [parse_json(json_args) if json_args else parse(log) for log in logs]
    colours = setting_colours(panels)
    ncol = min(len(logs), 3)
    nrow = (len(logs) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.5 * ncol, 4 * nrow), squeeze=False)
    for ax, log, rates in zip(axes.flat, logs, panels):
        draw(ax, rates, labels, title if len(logs) == 1 else log.rsplit("/", 1)[-1], colours)
    for ax in list(axes.flat)[len(logs):]:
        ax.set_visible(False)
    if len(logs) > 1:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(pos[-1], dpi=120)


if __name__ == "__main__":
    main()
