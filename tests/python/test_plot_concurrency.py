"""bench/plot_concurrency.py: the decode-rate-against-requests chart in bench/RESULTS.md is drawn
from gpu_concurrency_ab.sh's lines; its parser is checked here on lines with known rates, in the
script's format and in the inline format of the session that introduced it."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("plot_concurrency",
                                               ROOT / "bench" / "plot_concurrency.py")
plot_concurrency = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_concurrency)


def row(c, rate):
    """a `bench --concurrency` table row: all-decoding t/s in the 8th column"""
    return f"| llama2-7b-f16.gguf | 16 | {c} | 128 | 128 | {rate - 20:.2f} | 99.00 | {rate:.2f} | 0.03 | 1.1 |"


def test_script_format(tmp_path):
    lines = []
    for rnd, (a, b) in enumerate([(259.5, 241.9), (259.7, 241.3)], start=1):
        for e, tg, c8 in (("0", a, 886.8), ("1", b, 1398.2)):
            lines.append(f"r{rnd} SI_CUDA_GEMV_H16_MMA={e} tg: | llama2-7b-f16.gguf | f16 | 1 | 2 |"
                         f" 3 | 16 | tg128 | {tg} ± 0.40 | 3500.1 | 83.1% |\n")
            lines.append(f"r{rnd} SI_CUDA_GEMV_H16_MMA={e} c8: {row(8, c8)}\n")
    f = tmp_path / "engine.txt"
    f.write_text("".join(lines))
    rates = plot_concurrency.parse(f)
    assert dict(rates["0"]) == {1: [259.5, 259.7], 8: [886.8, 886.8]}
    assert dict(rates["1"]) == {1: [241.9, 241.3], 8: [1398.2, 1398.2]}


def test_inline_format(tmp_path):
    """the tg128 value on a later line, after the bench's blank lines"""
    f = tmp_path / "engine.txt"
    f.write_text("r1 mma=0 tg:  \n \n \n tg128   259.53 ± 9.71 \n"
                 f"r1 mma=0 c4: {row(4, 566.73)}\n"
                 "r1 mma=1 tg:  \n \n tg128   241.93 ± 0.23 \n"
                 f"r1 mma=1 c4: {row(4, 782.89)}\n"
                 "r1 mma=1 c8: (no row)\n")
    rates = plot_concurrency.parse(f)
    assert dict(rates["0"]) == {1: [259.53], 4: [566.73]}
    assert dict(rates["1"]) == {1: [241.93], 4: [782.89]}
