#!/usr/bin/env python3
"""streaming_memory.py — constant memory over a long streaming generation (StreamingLLM
attention sinks, issue 4's proof).

Runs `swiftinfer run --parallel 1 --stream-sink S --stream-window W --ignore-eos -n N`, samples
the process's VmRSS from /proc/PID/status every --interval seconds, and reads the engine's
periodic "stream: tokens N, kv blocks used B/T, rss R KiB" lines from its standard error. Writes
the samples to PREFIX.csv (time, source, tokens, kv_blocks_used, rss_kib) and, when matplotlib
is importable, PREFIX.png; prints a one-line summary (first/last RSS after warm-up, KV blocks
seen).

usage: bench/streaming_memory.py --model M [--tokens 200000] [--sink 4] [--window 1020]
       [--stats-every 10000] [--threads 2] [--build build] [--out bench/streaming_memory_tiny]
"""
import argparse
import csv
import pathlib
import re
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
STAT = re.compile(r"stream: tokens (\d+), kv blocks used (\d+)/(\d+), rss (-?\d+) KiB")


def vmrss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=200000)
    ap.add_argument("--sink", type=int, default=4)
    ap.add_argument("--window", type=int, default=1020)
    ap.add_argument("--stats-every", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "streaming_memory"))
    a = ap.parse_args()

    cmd = [str(pathlib.Path(a.build) / "swiftinfer"), "run", "-m", a.model, "-p",
           "The history of the printing press", "--parallel", "1", "--stream-sink", str(a.sink),
           "--stream-window", str(a.window), "--stats-every", str(a.stats_every),
           "-n", str(a.tokens), "--ignore-eos", "--greedy", "-t", str(a.threads)]
    print("$ " + " ".join(cmd), file=sys.stderr)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows, stats, tail = [], [], []

    def read_stderr():
        for line in proc.stderr:
            tail.append(line)
            m = STAT.search(line)
            if m:
                tok, used, total, rss = map(int, m.groups())
                stats.append((time.monotonic() - t0, tok, used, total, rss))
                print(line.rstrip(), file=sys.stderr)

    reader = threading.Thread(target=read_stderr)
    reader.start()
    while proc.poll() is None:
        rss = vmrss_kib(proc.pid)
        if rss is not None:
            rows.append((time.monotonic() - t0, "proc", "", "", rss))
        time.sleep(a.interval)
    reader.join()
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"swiftinfer failed ({proc.returncode}):\n" + "".join(tail[-20:]))
    for t, tok, used, total, rss in stats:
        rows.append((t, "engine", tok, used, rss))
    rows.sort()
    out = pathlib.Path(a.out)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seconds", "source", "tokens", "kv_blocks_used", "rss_kib"])
        for r in rows:
            w.writerow([f"{r[0]:.2f}", *r[1:]])

    # the last line may be printed after the engine finished the request (0 blocks then)
    while len(stats) > 1 and stats[-1][2] == 0:
        stats.pop()
    if not stats:
        sys.exit("no stats lines seen (is --stats-every larger than --tokens?)")
    blocks = sorted({s[2] for s in stats})
    # warm-up: until the KV block count reaches its final (constant) value
    warm = stats[next(i for i, s in enumerate(stats) if s[2] == stats[-1][2]):]
    rss_first, rss_last = warm[0][4], warm[-1][4]
    peak = max(r[4] for r in rows)
    per_tok = (rss_last - rss_first) * 1024 / max(1, warm[-1][1] - warm[0][1])
    print(f"model {pathlib.Path(a.model).name}, sink {a.sink}, window {a.window}: "
          f"{stats[-1][1]} tokens in {wall:.0f} s ({stats[-1][1] / wall:.0f} tokens/s); "
          f"kv blocks used {blocks} of {stats[0][3]}; RSS {rss_first} KiB at "
          f"{warm[0][1]} tokens -> {rss_last} KiB at {warm[-1][1]} tokens "
          f"({per_tok:.1f} B/token), peak {peak} KiB")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([s[1] for s in stats], [s[4] / 1024 for s in stats], "o-", label="RSS (MiB)")
    ax.set_xlabel("tokens generated")
    ax.set_ylabel("RSS (MiB)")
    ax.set_ylim(0, max(s[4] for s in stats) / 1024 * 1.3)
    ax2 = ax.twinx()
    ax2.plot([s[1] for s in stats], [s[2] for s in stats], "s--", color="tab:orange",
             label="KV blocks used")
    ax2.set_ylabel("KV blocks used")
    ax2.set_ylim(0, max(s[2] for s in stats) * 1.5 + 1)
    ax.set_title(f"streaming generation, {pathlib.Path(a.model).name}, "
                 f"sink {a.sink} + window {a.window}", fontsize=9)
    fig.legend(loc="center right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=80)


if __name__ == "__main__":
    main()
