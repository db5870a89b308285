"""Bad input to the command line: each case is one clear line on stderr and a non-zero exit,
never a crash (a signal) or a traceback-like dump."""
import struct

import pytest

from conftest import run_cli

gguf = pytest.importorskip("gguf")


def check_error(proc, *needles):
    assert proc.returncode not in (0,), proc
    assert proc.returncode > 0, f"killed by signal {-proc.returncode}"
    err = proc.stderr.decode()
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("swiftinfer: "), err
    for n in needles:
        assert n in lines[0], f"{n!r} not in {lines[0]!r}"


def write_gguf(path, arch="llama", version=None):
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if version is not None:
        data = bytearray(path.read_bytes())
        data[4:8] = struct.pack("<I", version)
        path.write_bytes(bytes(data))
    return path


def test_missing_file(binary, tmp_path):
    p = tmp_path / "nope.gguf"
    check_error(run_cli("run", "-m", p, "-p", "hi", check=False), str(p))


def test_unreadable_directory(binary, tmp_path):
    check_error(run_cli("info", tmp_path, check=False), str(tmp_path))


def test_wrong_magic(binary, tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGML" + b"\0" * 60)
    check_error(run_cli("run", "-m", p, "-p", "hi", check=False), str(p), "magic")


def test_empty_file(binary, tmp_path):
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    check_error(run_cli("info", p, check=False), str(p))


@pytest.mark.parametrize("version", [1, 4, 99])
def test_unsupported_version(binary, tmp_path, version):
    p = write_gguf(tmp_path / "v.gguf", version=version)
    check_error(run_cli("run", "-m", p, "-p", "hi", check=False), str(p), "version")


def test_unsupported_architecture(binary, tmp_path):
    p = write_gguf(tmp_path / "arch.gguf", arch="gptj")
    check_error(run_cli("run", "-m", p, "-p", "hi", check=False), "gptj")


def test_truncated_model(binary, default_model, tmp_path):
    p = tmp_path / "cut.gguf"
    p.write_bytes(default_model.read_bytes()[:5_000_000])
    check_error(run_cli("run", "-m", p, "-p", "hi", check=False), str(p))


def test_logit_bias_outside_the_vocabulary(binary, default_model):
    proc = run_cli("run", "-m", default_model, "-p", "hi", "-n", "2", "-l", "999999+1",
                   check=False)
    check_error(proc, "logit_bias token 999999", "vocabulary")


def test_prompt_longer_than_context(binary, default_model):
    proc = run_cli("run", "-m", default_model, "-c", 16, "-p", "word " * 100, check=False)
    check_error(proc, "context")


@pytest.mark.parametrize("args,needle", [
    (["run", "--temp", "abc"], "--temp"),
    (["run", "--temp", "-1"], "--temp"),
    (["run", "-n", "1.5"], "-n"),
    (["run", "--top-p", "2"], "--top-p"),
    (["run", "-t", "0"], "-t"),
    (["run", "--bogus"], "--bogus"),
    (["run", "-m"], "-m"),
    (["run", "-p", "x"], "model"),
    (["frobnicate"], "frobnicate"),
    (["run", "--kv-cache-dtype", "int8"], "--kv-cache-dtype expects auto, f16, fp8 or fp8_e4m3"),
    (["run", "--kv-cache-dtype", "FP8"], "'FP8'"),
    (["serve", "--kv-cache-dtype", "fp16"], "--kv-cache-dtype expects auto, f16, fp8 or fp8_e4m3"),
    (["bench", "--kv-cache-dtype", "e5m2"], "--kv-cache-dtype expects auto, f16, fp8 or fp8_e4m3"),
    (["run", "--logit-bias", "12"], "TOKEN_ID+BIAS"),
    (["run", "-l", "12+x"], "'12+x'"),
    (["run", "-l", "-3+1"], "'-3+1'"),
    (["chat", "-l", "12-inf"], "'12-inf'"),
    (["run", "-l", "12-101"], "outside [-100, 100]"),
    (["run", "-l", "12+1", "-l", "12-1"], "token 12 is given twice"),
])
def test_invalid_flags(binary, args, needle):
    check_error(run_cli(*args, check=False), needle)


@pytest.mark.parametrize("cmd", ["run", "chat", "info", "tokenize"])
def test_help(binary, cmd):
    proc = run_cli(cmd, "--help")
    assert b"usage: swiftinfer " + cmd.encode() in proc.stdout


@pytest.mark.parametrize("args", [
    ["run", "--parallel", 2, "-p", "hi", "-n", 1],
    ["run", "-p", "hi", "-n", 1],
    ["chat", "-p", "hi", "-n", 1],
    ["bench", "-c", 2, "-p", 8, "-n", 2],
])
def test_kv_cache_dtype_fp8_refused_on_cpu(binary, default_model, args):
    """the CPU backend keeps an f16 cache: fp8 is a clear error naming the flag and the fix, and
    nothing else is printed (no table header before it)"""
    proc = run_cli(*args, "-m", default_model, "--device", "cpu", "--kv-cache-dtype", "fp8",
                   check=False)
    check_error(proc, "--kv-cache-dtype fp8", "--device cuda")
    assert proc.stdout == b"", proc.stdout


def test_kv_cache_dtype_fp8_refused_on_cpu_bench_pp_tg(binary, default_model):
    """bench pp/tg prints its machine lines and progress first; the error is its last word and
    no result row is printed"""
    proc = run_cli("bench", "-m", default_model, "-p", 8, "-n", 2, "--bw", 20, "--device", "cpu",
                   "--kv-cache-dtype", "fp8", check=False)
    assert proc.returncode == 1, proc
    last = proc.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("swiftinfer: session: --kv-cache-dtype fp8"), last
    assert "--device cuda" in last, last
    assert b"| pp8 |" not in proc.stdout and b"| tg2 |" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("value", ["auto", "f16"])
def test_kv_cache_dtype_f16_names_run(binary, default_model, value):
    proc = run_cli("run", "-m", default_model, "--device", "cpu", "--kv-cache-dtype", value,
                   "--parallel", 1, "-p", "hi", "-n", 2)
    assert proc.returncode == 0


@pytest.mark.parametrize("cmd", ["run", "chat", "serve", "bench"])
def test_help_names_kv_cache_dtype(binary, cmd):
    proc = run_cli(cmd, "--help")
    assert b"--kv-cache-dtype" in proc.stdout and b"fp8_e4m3" in proc.stdout


@pytest.mark.parametrize("type_name", ["q6_k_m", "q4_k_mm", "q8_0_m", "q7", "_m"])
def test_synth_unknown_type(binary, tmp_path, type_name):
    """synth's --type: a plain type or a _k_m mixture around q3_k / q4_k / q5_k; anything else is
    one line naming it, and no file is left behind."""
    out = tmp_path / "m.gguf"
    check_error(run_cli("synth", "-o", out, "--type", type_name, check=False), type_name)
    assert not out.exists()
