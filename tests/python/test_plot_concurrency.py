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
    assert dict(rates["SI_CUDA_GEMV_H16_MMA=0"]) == {1: [259.5, 259.7], 8: [886.8, 886.8]}
    assert dict(rates["SI_CUDA_GEMV_H16_MMA=1"]) == {1: [241.9, 241.3], 8: [1398.2, 1398.2]}


def test_inline_format(tmp_path):
    """the tg128 value on a later line, after the bench's blank lines"""
    f = tmp_path / "engine.txt"
    f.write_text("r1 mma=0 tg:  \n \n \n tg128   259.53 ± 9.71 \n"
                 f"r1 mma=0 c4: {row(4, 566.73)}\n"
                 "r1 mma=1 tg:  \n \n tg128   241.93 ± 0.23 \n"
                 f"r1 mma=1 c4: {row(4, 782.89)}\n"
                 "r1 mma=1 c8: (no row)\n")
    rates = plot_concurrency.parse(f)
    assert dict(rates["mma=0"]) == {1: [259.53], 4: [566.73]}
    assert dict(rates["mma=1"]) == {1: [241.93], 4: [782.89]}


def test_c1_rows_over_tg(tmp_path):
    """where a setting has `--concurrency 1` rows, one request is those (the engine at the log's
    prompt length), not tg128; settings without them keep tg128"""
    f = tmp_path / "engine.txt"
    f.write_text("r1 SI_CUDA_ATTN_PART=1024 tg: | m | q4_0 | 1 | 2 | 3 | 16 | tg128 | 677.07 ± 0.12 |\n"
                 f"r1 SI_CUDA_ATTN_PART=1024 c1: {row(1, 552.93)}\n"
                 f"r1 SI_CUDA_ATTN_PART=1024 c2: {row(2, 913.29)}\n"
                 "r1 SI_NONE=0 tg: | m | q4_0 | 1 | 2 | 3 | 16 | tg128 | 673.21 ± 1.11 |\n"
                 f"r1 SI_NONE=0 c2: {row(2, 946.09)}\n")
    rates = plot_concurrency.parse(f)
    assert dict(rates["SI_CUDA_ATTN_PART=1024"]) == {1: [552.93], 2: [913.29]}
    assert dict(rates["SI_NONE=0"]) == {1: [673.21], 2: [946.09]}


def test_draws_several_logs(tmp_path):
    """two logs side by side, a --label, into a PNG"""
    for name in ("engine-f16.txt", "engine-q4_0.txt"):
        (tmp_path / name).write_text(f"r1 SI_NONE=0 c1: {row(1, 260.4)}\nr1 SI_NONE=0 c2: {row(2, 429.9)}\n")
    png = tmp_path / "out.png"
    import sys
    argv = sys.argv
    sys.argv = ["plot_concurrency.py", f"{tmp_path / 'engine-f16.txt'},{tmp_path / 'engine-q4_0.txt'}",
                str(png), "--title", "t", "--label", "SI_NONE=0=default"]
    try:
        plot_concurrency.main()
    finally:
        sys.argv = argv
    assert png.stat().st_size > 1000


def test_panels_in_rows_with_one_colour_a_setting(tmp_path):
    """four logs: two rows of at most three panels; a setting that only some logs have keeps its
    colour in every panel"""
    logs = []
    for i, name in enumerate(("a.txt", "b.txt", "c.txt", "d.txt")):
        text = f"r1 gemv=one c9: {row(9, 2000.0 + i)}\n"
        if i % 2:
            text += f"r1 gemv=two c9: {row(9, 1500.0 + i)}\n"
        (tmp_path / name).write_text(text)
        logs.append(str(tmp_path / name))
    panels = [plot_concurrency.parse(f) for f in logs]
    assert plot_concurrency.setting_colours(panels) == {"gemv=one": "C0", "gemv=two": "C1"}
    assert plot_concurrency.setting_colours(panels[:1]) == {"gemv=one": "C0"}
    png = tmp_path / "grid.png"
    import sys
    argv = sys.argv
    sys.argv = ["plot_concurrency.py", ",".join(logs), str(png), "--label", "gemv=two=two launches"]
    try:
        plot_concurrency.main()
    finally:
        sys.argv = argv
    assert png.stat().st_size > 1000


def test_bench_json(tmp_path):
    """`swiftinfer bench -c ... --json` files as SETTING=FILE: a setting's files are its rounds;
    drawn into a PNG with the data's request counts as ticks"""
    def bench_json(name, rates):
        f = tmp_path / name
        f.write_text("[" + ", ".join(f'{{"model": "m.gguf", "concurrency": {c}, "n_prompt": 512, '
                                     f'"all_decoding_tps": {r}}}' for c, r in rates) + "]")
        return f
    r1 = bench_json("base-1.json", [(8, 1681.1), (16, 1223.0)])
    r2 = bench_json("base-2.json", [(8, 1680.3), (16, 1223.1)])
    new = bench_json("new.json", [(8, 1686.6), (16, 2218.5), (64, 3834.4)])
    rates = plot_concurrency.parse_json([f"base={r1}", f"base={r2}", f"new={new}"])
    assert dict(rates["base"]) == {8: [1681.1, 1680.3], 16: [1223.0, 1223.1]}
    assert dict(rates["new"]) == {8: [1686.6], 16: [2218.5], 64: [3834.4]}
    png = tmp_path / "out.png"
    import sys
    argv = sys.argv
    sys.argv = ["plot_concurrency.py", "--json", f"base={r1}", "--json", f"new={new}", str(png)]
    try:
        plot_concurrency.main()
    finally:
        sys.argv = argv
    assert png.stat().st_size > 1000
