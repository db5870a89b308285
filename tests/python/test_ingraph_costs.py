"""scripts/ingraph_costs.py: the in-graph cost table bench/RESULTS.md reports is arithmetic on
gpu_decode_ab.sh's tg128 lines; checked here on lines with known rates."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ingraph_costs.py"


def tg_line(rnd, typ, mask, rate):
    """one line as gpu_decode_ab.sh writes it (the bench table row after the setting)"""
    return (f"round {rnd} {typ} build-gpucarry/swiftinfer SI_CUDA_SKIP={mask}: | llama2-7b-{typ}"
            f".gguf | {typ} | 3616.44 | 6738.42 | 3545.33 | 16 | tg128 | {rate} ± 0.10 | 2098.63"
            f" | 49.8% |\n")


def run(tmp_path, lines, *args):
    f = tmp_path / "tg.txt"
    f.write_text("".join(lines))
    return subprocess.run([sys.executable, str(SCRIPT), str(f), *args], capture_output=True,
                          text=True)


def test_costs_per_layer_and_bandwidth(tmp_path):
    # baseline 500 t/s (2 ms a token) in two rounds; without the output projection 512 t/s:
    # 2 - 1000/512 = 0.046875 ms a token, / 32 layers = 1.46 us; 4096 x 4096 q4_0 = 9.437 MB
    # -> 9.437e6 / 1.465e-6 s / 4.21e12 = 153 %; without both norms 640 t/s: 0.4375 ms a token,
    # 6.8 us per norm (two a layer)
    proc = run(tmp_path, [tg_line(1, "q4_0", 0, 490.0), tg_line(2, "q4_0", 0, 510.0),
                          tg_line(1, "q4_0", 16, 512.0), tg_line(1, "q4_0", 33, 640.0)])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[0] == "q4_0: 500.0 t/s, 2.000 ms a token"
    proj = next(l for l in out if "output projection" in l)
    assert "0.047 ms a token" in proj and "1.5 us a layer" in proj and "(9.4 MB: 153% of" in proj
    norms = next(l for l in out if "both norms" in l)
    assert "0.438 ms a token" in norms and "6.8 us a layer" in norms


def test_bandwidth_of_another_machine(tmp_path):
    # the output projection above (9.437 MB in 1.465 us) against an H100's 3,040 GB/s: 212 %
    lines = [tg_line(1, "q4_0", 0, 500.0), tg_line(1, "q4_0", 16, 512.0)]
    proc = run(tmp_path, lines, "--bw", "3040")
    assert proc.returncode == 0, proc.stderr
    proj = next(l for l in proc.stdout.splitlines() if "output projection" in l)
    assert "(9.4 MB: 212% of 3.04 TB/s)" in proj
    for bad in ("fast", "0", "-5"):
        proc = run(tmp_path, lines, "--bw", bad)
        assert proc.returncode != 0
        assert f"--bw {bad}: not a bandwidth in GB/s" in proc.stderr


def test_no_skip_lines_is_an_error(tmp_path):
    proc = run(tmp_path, ["round 1 q4_0 bin SI_CUDA_PDL=1: | tg128 | 500 |\n"])
    assert proc.returncode != 0
    assert "no 'SI_CUDA_SKIP=' tg128 lines" in proc.stderr


def test_missing_baseline_is_named(tmp_path):
    proc = run(tmp_path, [tg_line(1, "f16", 2, 300.0)])
    assert proc.returncode == 0
    assert "f16: no SI_CUDA_SKIP=0 baseline" in proc.stdout
