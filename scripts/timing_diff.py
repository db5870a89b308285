#!/usr/bin/env python3
"""timing_diff.py OLD NEW [--threshold PCT] [--min-us US] [--top N] — the kernel timings of two
GPU test runs side by side, for noticing a kernel that got slower (a report, not a test: speed is
judged by benchmarks; this only points at what to measure).

OLD and NEW are two logs, or two folders of logs (tests/cuda/run.sh's $OUT, or a saved copy such
as bench/gpu-2026-12-02-s29/call4/runsh/), compared file by file where both have the name. Every
line holding a time "N us" counts: the line with its numbers-with-units (us, ms, GB/s, %) taken
out is its key, and its times in order are its values, e.g.

    TIME decode 64 seqs x len 640   H=32/32 hd=128 v2 default split:    196.1 us   3422.2 GB/s ...
    bench gemv q8_0  12288x4096  nb=1  norm + gemv_pre   27.01 us   gemv_norm   23.68 us

A key seen again in one file gets "#2", "#3"... Printed: how many timings were compared, then those
that changed by at least PCT percent (default 10; both ways, slower first), at most N lines.
Times under US microseconds (default 1) are left out: launch noise. Exit status 0 unless a path
cannot be read.

Why it exists: s21's attention change made the 64 x 640 decode-attention kernel 22 % slower
(160.9 -> 196.3 us) and every run.sh log showed it for seven sessions before anyone compared
(bench/RESULTS.md 2026-12-02 s29). run.sh prints this report against the newest saved run."""
import argparse
import os
import re
import sys
from collections import Counter

TIME_RE = re.compile(r"(\d+(?:\.\d+)?)\s*us\b")
WITH_UNIT_RE = re.compile(r"\d+(?:\.\d+)?\s*(?:us\b|ms\b|GB/s|%)")


def timings(text):
    """{key: [microseconds, ...]} of the lines of text that hold a time"""
    out, seen = {}, Counter()
    for line in text.splitlines():
        times = [float(t) for t in TIME_RE.findall(line)]
        if not times:
            continue
        key = " ".join(WITH_UNIT_RE.sub("_", line).split())
        seen[key] += 1
        if seen[key] > 1:
            key = f"{key} #{seen[key]}"
        out[key] = times
    return out


def log_pairs(old, new):
    """[(name, old file, new file)]: two files, or the files two folders share"""
    if os.path.isdir(old) != os.path.isdir(new):
        raise OSError(f"{old} and {new}: give two files or two folders")
    if not os.path.isdir(old):
        return [(os.path.basename(new), old, new)]
    names = sorted(set(os.listdir(old)) & set(os.listdir(new)))
    return [(n, os.path.join(old, n), os.path.join(new, n)) for n in names
            if os.path.isfile(os.path.join(old, n)) and os.path.isfile(os.path.join(new, n))]


def compare(pairs, min_us):
    """[(change %, old us, new us, name, key)] of every timing in both runs"""
    rows = []
    for name, a, b in pairs:
        with open(a, errors="replace") as fa, open(b, errors="replace") as fb:
            ta, tb = timings(fa.read()), timings(fb.read())
        for key in ta.keys() & tb.keys():
            for x, y in zip(ta[key], tb[key]):
                if x >= min_us and y >= min_us:
                    rows.append((100.0 * (y - x) / x, x, y, name, key))
    return rows


def report(rows, threshold, top):
    slower = sorted((r for r in rows if r[0] >= threshold), key=lambda r: -r[0])
    faster = sorted((r for r in rows if r[0] <= -threshold), key=lambda r: r[0])
    lines = [f"timing_diff: {len(rows)} timings compared, {len(slower)} at least {threshold:g} % "
             f"slower, {len(faster)} at least {threshold:g} % faster"]
    for change, x, y, name, key in (slower + faster)[:top]:
        lines.append(f"  {change:+6.1f} %  {x:9.2f} -> {y:9.2f} us  {name}: {key[:110]}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--threshold", type=float, default=10.0, help="percent (default 10)")
    ap.add_argument("--min-us", type=float, default=1.0, help="ignore shorter times (default 1)")
    ap.add_argument("--top", type=int, default=20, help="most lines listed (default 20)")
    a = ap.parse_args(argv)
    try:
        rows = compare(log_pairs(a.old, a.new), a.min_us)
    except OSError as e:
        print(f"timing_diff: {e}", file=sys.stderr)
        return 1
    print(report(rows, a.threshold, a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
