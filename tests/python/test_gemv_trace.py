"""bench/gemv_trace.py: the per-shape phase table bench/RESULTS.md reports is arithmetic on
persist_chain's per-CTA trace; checked here on a trace with known times."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gemv_trace.py"
HEADER = "launch,M,K,cta,smid,grid,start,waited,x_ready,end\n"


def row(launch, M, K, cta, start, waited, x_ready, end):
    return f"{launch},{M},{K},{cta},{cta},2,{start},{waited},{x_ready},{end}\n"


def run(tmp_path, rows, *args):
    f = tmp_path / "trace.csv"
    f.write_text(HEADER + "".join(rows))
    return subprocess.run([sys.executable, str(SCRIPT), str(f), *args], capture_output=True,
                          text=True)


def test_phases_from_the_launch_before(tmp_path):
    # launch 0 ends at 10,000 ns (its last CTA); launch 1 (4096 x 4096) has two CTAs: starts
    # 9,000 / 11,000, waits 12,000 / 12,000, x ready 13,000 / 15,000, done 16,000 / 20,000
    rows = [row(0, 4096, 4096, 0, 0, 1000, 2000, 8000), row(0, 4096, 4096, 1, 0, 1000, 2000, 10000),
            row(1, 4096, 4096, 0, 9000, 12000, 13000, 16000),
            row(1, 4096, 4096, 1, 11000, 12000, 15000, 20000)]
    proc = run(tmp_path, rows)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.strip().startswith("4096x4096"))
    cols = line.split()
    # shape, n, CTAs, first start, p50 start, wait, x ready, p50 done, done, tail, ideal, early
    assert cols[1:3] == ["1", "2"]
    assert [float(c) for c in cols[3:10]] == [-1.0, 0.0, 2.0, 4.0, 8.0, 10.0, 2.0]
    # 4096 x 4096 Q4_0: 9,437,184 bytes at 4.21 TB/s
    assert cols[10] == "2.24"
    # one of the two CTAs started (9,000) before launch 0 was done (10,000)
    assert cols[11] == "50%"
    assert "norm inside" not in proc.stdout  # a trace without the norm's points


def test_norm_phases(tmp_path):
    # the norm's points (since s28): launch 1's CTAs wait at 12,000, have their row at 13,000 /
    # 14,000, its scale at 13,500 / 14,600 and x at 15,000 / 15,800: medians 1.5, 0.55, 1.35 us
    header = HEADER.rstrip("\n") + ",loaded,scaled\n"
    rows = [row(0, 12288, 4096, c, 0, 1000, 2000, 10000).rstrip("\n") + ",-1,-1\n" for c in (0, 1)]
    rows += [row(1, 12288, 4096, 0, 9000, 12000, 15000, 16000).rstrip("\n") + ",13000,13500\n",
             row(1, 12288, 4096, 1, 9000, 12000, 15800, 16000).rstrip("\n") + ",14000,14600\n"]
    f = tmp_path / "trace.csv"
    f.write_text(header + "".join(rows))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(f)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert ("norm inside 12288x4096: from the PDL wait, loads 1.50 us, sums 0.55 us, "
            "quantisation 1.35 us") in proc.stdout


def test_one_launch_is_an_error(tmp_path):
    proc = run(tmp_path, [row(0, 4096, 4096, 0, 0, 1, 2, 3)])
    assert proc.returncode != 0
    assert "needs two or more" in proc.stderr
