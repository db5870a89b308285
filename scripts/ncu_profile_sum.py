#!/usr/bin/env python3
"""ncu_profile_sum.py — sums an `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum`
report by kernel name (where a decode step's time goes), then lists the first --sequence kernels
in launch order (one layer's chain, to tell apart launches of one kernel template).

usage: ncu_profile_sum.py REPORT.csv [--sequence N]"""
import collections
import csv
import re
import sys


def main():
    path = sys.argv[1]
    seq_n = int(sys.argv[sys.argv.index("--sequence") + 1]) if "--sequence" in sys.argv else 0
    rows = list(csv.reader(l for l in open(path) if l.startswith('"')))
    if not rows:
        print(f"{path}: no ncu rows")
        return 1
    hdr, rows = rows[0], rows[1:]
    ki, mi, vi, ii = (hdr.index(h) for h in ("Kernel Name", "Metric Name", "Metric Value", "ID"))
    per = collections.OrderedDict()
    for r in rows:
        per.setdefault((int(r[ii]), r[ki]), {})[r[mi]] = float(r[vi].replace(",", ""))
    agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for (_, name), m in per.items():
        a = agg[re.sub(r"\(.*", "", name)]
        a[0] += 1
        a[1] += m.get("gpu__time_duration.sum", 0) / 1e3
        a[2] += m.get("dram__bytes_read.sum", 0)
    tot = sum(a[1] for a in agg.values())
    print(f"{len(per)} kernels, {tot:.1f} us in all (isolated, serial)")
    for k, (n, us, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:9.1f} us {100*us/tot:5.1f}%  n={n:4d}  {us/n:7.2f} us each  "
              f"{b/us/1e3 if us else 0:7.1f} GB/s  {k[:110]}")
    if seq_n:
        print(f"first {seq_n} kernels in launch order:")
        for (i, name), m in sorted(per.items())[:seq_n]:
            us = m.get("gpu__time_duration.sum", 0) / 1e3
            gb = m.get("dram__bytes_read.sum", 0) / us / 1e3 if us else 0
            short = re.sub(r"\(.*", "", name)
            print(f"  {us:8.2f} us {gb:7.1f} GB/s  {short[:100]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
