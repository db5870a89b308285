#!/usr/bin/env python3
"""bench/plot_results.py — our CPU numbers next to issue 3's llama.cpp reference.

Reads the JSON of `swiftinfer bench --json` (as bench/run_cpu.sh writes it), prints the markdown
comparison table for bench/RESULTS.md (pp128 / tg64 ours, reference, ratio, and the tg roofline
fraction) and draws a bar chart of ours vs the reference per shape and type. Without matplotlib
(the repo's .venv may lack it) it prints the table and skips the chart.

usage: plot_results.py BENCH_JSON [--png bench/cpu_tg.png] [--title TEXT]
"""
import argparse
import json
import os
import re
import sys

# upstream llama.cpp (Aug 2026), 2 threads, this machine kind, pp128 / tg64 tokens/s
# (issue 3; random-weight models with the Llama-2 32000-token vocabulary)
REFERENCE = {
    ("smollm2-135m", "f16"): (425, 33.5),
    ("smollm2-135m", "q8_0"): (475, 84.5),
    ("smollm2-135m", "q4_0"): (650, 121),
    ("smollm2-135m", "q4_1"): (190, 89),
    ("tinyllama-1.1b", "f16"): (66, 10.4),
    ("tinyllama-1.1b", "q8_0"): (57, 10.8),
    ("tinyllama-1.1b", "q4_0"): (96, 19.1),
    ("tinyllama-1.1b", "q4_1"): (31, 14.5),
}
TARGET_TG, TARGET_PP = 1.3, 1.2
ISSUE_BW_GBPS = 26.0  # issue 3's figure for this machine kind


def shape_of(path, type_):
    """(shape, type) from a run_cpu.sh file name, or (file name, type) for other models."""
    name = os.path.basename(path)
    m = re.match(r"(smollm2-135m|tinyllama-1\.1b)-([a-z0-9_]+)\.gguf$", name)
    return (m.group(1), m.group(2)) if m else (name, type_)


def collect(doc):
    """{(shape, type): {"pp": row, "tg": row}} in file order."""
    rows = {}
    for r in doc["results"]:
        key = shape_of(r["model"], r["type"])
        kind = "pp" if r["n_prompt"] else "tg"
        rows.setdefault(key, {})[kind] = r
    return rows


def fmt_ts(r):
    return f"{r['avg_ts']:.1f} ± {r['stddev_ts']:.1f}" if r else "—"


def table(doc, rows):
    bw = doc["bw_gbps"]
    out = [
        f"| shape | type | pp128 ours | pp128 llama.cpp | pp ratio | tg64 ours | tg64 llama.cpp "
        f"| tg ratio | weights/token MiB | tg GB/s | of {bw:.1f} GB/s (measured) "
        f"| of {ISSUE_BW_GBPS:.0f} GB/s (issue) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (shape, type_), t in rows.items():
        pp, tg = t.get("pp"), t.get("tg")
        ref = REFERENCE.get((shape, type_))
        pp_ratio = f"{pp['avg_ts'] / ref[0]:.2f}×" if pp and ref else "—"
        tg_ratio = f"{tg['avg_ts'] / ref[1]:.2f}×" if tg and ref else "—"
        any_row = pp or tg
        wpt = any_row["weight_bytes_per_token"] / 2**20
        gbps = f"{tg['gbps']:.2f}" if tg else "—"
        frac = f"{100 * tg['roofline_frac']:.0f}%" if tg else "—"
        frac_issue = f"{100 * tg['gbps'] / ISSUE_BW_GBPS:.0f}%" if tg else "—"
        out.append(
            f"| {shape} | {type_} | {fmt_ts(pp)} | {ref[0] if ref else '—'} | {pp_ratio} "
            f"| {fmt_ts(tg)} | {ref[1] if ref else '—'} | {tg_ratio} | {wpt:.1f} | {gbps} "
            f"| {frac} | {frac_issue} |"
        )
    return "\n".join(out)


def plot(rows, png, title):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_results.py: matplotlib not available, chart skipped", file=sys.stderr)
        return False
    keys = [k for k in rows if k in REFERENCE or k[0] in ("smollm2-135m", "tinyllama-1.1b")]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, kind, idx, target in ((axes[0], "tg", 1, TARGET_TG), (axes[1], "pp", 0, TARGET_PP)):
        labels, ours, ref = [], [], []
        for k in keys:
            r = rows[k].get(kind)
            labels.append(f"{'SmolLM2' if k[0].startswith('smol') else 'TinyLlama'}\n{k[1]}")
            ours.append(r["avg_ts"] if r else 0)
            ref.append(REFERENCE[k][idx] if k in REFERENCE else 0)
        xs = range(len(labels))
        w = 0.27
        ax.bar([x - w for x in xs], ours, w, label="SwiftInfer")
        ax.bar(list(xs), ref, w, label="llama.cpp (issue 3)")
        ax.bar([x + w for x in xs], [v * target for v in ref], w, label=f"target {target}×",
               color="none", edgecolor="gray", linestyle="--")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("tokens/s (log)")
        ax.set_title(f"{'tg64' if kind == 'tg' else 'pp128'}, 2 threads")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot_results.py: wrote {png}", file=sys.stderr)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_json")
    ap.add_argument("--png", default=os.path.join(os.path.dirname(__file__), "cpu_tg.png"))
    ap.add_argument("--title", default="SwiftInfer vs llama.cpp on the CPU (issue 3)")
    a = ap.parse_args()
    with open(a.bench_json) as f:
        doc = json.load(f)
    rows = collect(doc)
    print(table(doc, rows))
    plot(rows, a.png, a.title)


if __name__ == "__main__":
    main()
