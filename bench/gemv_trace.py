#!/usr/bin/env python3
"""Where a chain of decode GEMVs loses time between matrices, from persist_chain's trace
(a build with -DGEMV_Q8X_TRACE writes trace-TYPE.csv: one row per CTA per launch, times in ns).

For each matrix shape, averaged over the chain's launches of that shape, in us, each time taken
from the moment the launch before it had its last CTA done ("prev done"):
  first start   the first CTA of this launch starts (negative: while the one before still ran)
  p50 start     half of its CTAs have started
  wait          the median CTA's PDL wait returns (the launch before complete and flushed)
  x ready       the median CTA has x in shared memory (its norm or copy done)
  p50 done      half of its CTAs are done
  done          its last CTA is done: the launch's share of the chain
  tail          done - p50 done: how long the last half of the CTAs keeps the launch open
  ideal         its bytes at 4.21 TB/s
  early         the share of its CTAs that started before the launch before was done
Traces with the norm's two points (loaded, scaled; since s28) add, for the launches with the
norm inside, the median CTA's time from its PDL wait to its row loaded, from there to the row's
scale known, and from there to x quantised in shared memory.

usage: gemv_trace.py trace-q4_0.csv [bytes per 1024 elements, 576 for Q4_0]
       gemv_trace.py --plot out.png [--launches A:B] [--title T] LABEL=trace.csv[.gz] ...
         (one panel per trace: every CTA of launches A..B-1 as a line from its start, grey until
         its PDL wait returns, orange until x is ready, blue until it is done; matplotlib)
"""
import argparse
import csv
import gzip
import statistics
import sys
from collections import defaultdict


def load(path):
    """{launch: [CTA records]}, {launch: (M, K)} from a trace CSV (gzipped or not)"""
    launches = defaultdict(list)
    shape = {}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for row in csv.DictReader(f):
            l = int(row["launch"])
            rec = {k: int(row[k]) for k in ("start", "waited", "x_ready", "end")}
            for k in ("loaded", "scaled"):  # -1 (or no column): no norm inside
                rec[k] = int(row.get(k) or -1)
            launches[l].append(rec)
            shape[l] = (int(row["M"]), int(row["K"]))
    return launches, shape


def plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = (int(v) for v in args.launches.split(":"))
    fig, axes = plt.subplots(len(args.traces), 1, figsize=(11, 3.2 * len(args.traces)),
                             sharex=True, squeeze=False)
    for ax, spec in zip(axes[:, 0], args.traces):
        label, path = spec.split("=", 1)
        launches, shape = load(path)
        t0 = max(r["end"] for r in launches[a - 1])  # the launch before has its last CTA done
        y = 0
        for l in range(a, b):
            rs = sorted(launches[l], key=lambda r: r["start"])
            for r in rs:
                for lo, hi, color in (("start", "waited", "0.75"), ("waited", "x_ready", "tab:orange"),
                                      ("x_ready", "end", "tab:blue")):
                    ax.plot([(r[lo] - t0) / 1e3, (r[hi] - t0) / 1e3], [y, y], color=color, lw=0.6)
                y += 1
            M, K = shape[l]
            done = (max(r["end"] for r in rs) - t0) / 1e3
            ax.axvline(done, color="k", lw=0.5, ls=":")
            ax.text(done, y - len(rs) / 2, f" {M}x{K}", fontsize=7, va="center")
        ax.set_ylabel(f"{label}\nCTAs by launch")
        ax.set_yticks([])
    axes[-1, 0].set_xlabel("us after the launch before the first had its last CTA done "
                           "(grey: to the PDL wait; orange: to x ready; blue: rows)")
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=130)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--plot":
        p = argparse.ArgumentParser()
        p.add_argument("--plot", required=True)
        p.add_argument("--launches", default="5:9")
        p.add_argument("--title", default="decode GEMV chain, per CTA")
        p.add_argument("traces", nargs="+")
        return plot(p.parse_args())
    path = sys.argv[1]
    per1024 = int(sys.argv[2]) if len(sys.argv) > 2 else 576
    launches, shape = load(path)
    order = sorted(launches)
    if len(order) < 2:
        sys.exit(f"gemv_trace.py: {path} has {len(order)} launch(es); the summary needs two or more")
    per_shape = defaultdict(lambda: defaultdict(list))
    for i, l in enumerate(order[1:], 1):
        prev_done = max(r["end"] for r in launches[order[i - 1]])
        rs = launches[l]
        ends = sorted(r["end"] for r in rs)
        starts = sorted(r["start"] for r in rs)
        m = per_shape[shape[l]]
        m["ctas"].append(len(rs))
        m["first start"].append(starts[0] - prev_done)
        m["p50 start"].append(statistics.median(starts) - prev_done)
        m["wait"].append(statistics.median(r["waited"] for r in rs) - prev_done)
        m["x ready"].append(statistics.median(r["x_ready"] for r in rs) - prev_done)
        m["p50 done"].append(statistics.median(ends) - prev_done)
        m["done"].append(ends[-1] - prev_done)
        m["tail"].append(ends[-1] - statistics.median(ends))
        m["early"].append(sum(r["start"] < prev_done for r in rs) / len(rs))
        if all(r["loaded"] >= 0 and r["scaled"] >= 0 for r in rs):
            m["loads"].append(statistics.median(r["loaded"] - r["waited"] for r in rs))
            m["sums"].append(statistics.median(r["scaled"] - r["loaded"] for r in rs))
            m["quantisation"].append(statistics.median(r["x_ready"] - r["scaled"] for r in rs))
    cols = ["first start", "p50 start", "wait", "x ready", "p50 done", "done", "tail"]
    print(f"{'shape':>12} {'n':>3} {'CTAs':>5} " + " ".join(f"{c:>11}" for c in cols)
          + f" {'ideal':>7} {'early':>6}")
    total = 0.0
    for (M, K), m in sorted(per_shape.items(), key=lambda kv: -kv[0][0] * kv[0][1]):
        n = len(m["done"])
        ideal = M * K / 1024 * per1024 / 4.21e3 / 1e3  # us
        vals = [statistics.mean(m[c]) / 1e3 for c in cols]
        total += n * vals[cols.index("done")]
        print(f"{M:>6}x{K:<5} {n:>3} {statistics.mean(m['ctas']):5.0f} "
              + " ".join(f"{v:11.2f}" for v in vals)
              + f" {ideal:7.2f} {100 * statistics.mean(m['early']):5.0f}%")
    for (M, K), m in sorted(per_shape.items(), key=lambda kv: -kv[0][0] * kv[0][1]):
        if m["loads"]:
            loads, sums, quant = (statistics.mean(m[c]) / 1e3 for c in ("loads", "sums", "quantisation"))
            print(f"norm inside {M}x{K}: from the PDL wait, loads {loads:.2f} us, "
                  f"sums {sums:.2f} us, quantisation {quant:.2f} us")
    first = min(r["start"] for r in launches[order[0]])
    last = max(r["end"] for r in launches[order[-1]])
    print(f"chain: {(last - first) / 1e3:.1f} us from the first start to the last end; "
          f"{total:.1f} us in launches 1..{len(order) - 1}")


if __name__ == "__main__":
    main()
