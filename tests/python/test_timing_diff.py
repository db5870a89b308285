"""scripts/timing_diff.py: run.sh's report of kernel timings that moved against the last saved
run; checked here on logs with known times, in the formats the CUDA tests print."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "timing_diff.py"

ATTN = ("TIME decode 64 seqs x len 640   H=32/32 hd=128 v2 default split:    {t} us   3422.2 GB/s"
        "   81.3% of 4210  (x32 layers: 6.28 ms)\n")
FUSED = "bench gemv q8_0  12288x4096  nb=1  norm + gemv_pre   {a} us   gemv_norm   {b} us\n"
KERNELS = ("gemv  q8_0   4096x4096  nb=1         {t} us   1766.1 GB/s   41.9% of 4.21 TB/s | back to"
           " back   6.78 us  62.5%\n")


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True)


def write(folder, name, text):
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)


def test_folders_compared_file_by_file(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write(old, "test_cuda_attention.log", "PASS x\n" + ATTN.format(t="160.9"))
    write(new, "test_cuda_attention.log", ATTN.format(t="196.3") + "==== summary\n")
    write(old, "test_cuda_fused.log", FUSED.format(a="27.00", b="23.00"))
    write(new, "test_cuda_fused.log", FUSED.format(a="27.50", b="18.40"))
    write(old, "only_old.log", KERNELS.format(t="10.0"))  # no partner: not compared
    proc = run(old, new)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    # attention 1, fused 2 (same line, two times; the other numbers are not times)
    assert out[0] == ("timing_diff: 3 timings compared, 1 at least 10 % slower, 1 at least 10 % "
                      "faster")
    assert "+22.0 %" in out[1] and "160.90 ->    196.30 us" in out[1]
    assert "test_cuda_attention.log: TIME decode 64 seqs x len 640" in out[1]
    assert "-20.0 %" in out[2] and "test_cuda_fused.log" in out[2]
    assert len(out) == 3  # 27.0 -> 27.5 is under the threshold


def test_repeated_lines_and_threshold(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    # the same line twice in a file (a timed shape run twice): each compared with its namesake;
    # the "back to back" time on the same line is a second value
    a.write_text(KERNELS.format(t="10.00") + KERNELS.format(t="10.00"))
    b.write_text(KERNELS.format(t="10.40") + KERNELS.format(t="13.00"))
    proc = run(a, b, "--threshold", "3")
    out = proc.stdout.splitlines()
    assert out[0].startswith("timing_diff: 4 timings compared, 2 at least 3 % slower")
    assert "+30.0 %" in out[1] and out[1].endswith("#2")
    assert "+4.0 %" in out[2]


def test_short_times_left_out_and_bad_paths(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("empty kernel   0.50 us\n")
    b.write_text("empty kernel   0.90 us\n")
    assert run(a, b).stdout.startswith("timing_diff: 0 timings compared")
    proc = run(a, tmp_path)
    assert proc.returncode == 1 and "two files or two folders" in proc.stderr
    proc = run(a, tmp_path / "missing.log")
    assert proc.returncode == 1 and "missing.log" in proc.stderr
