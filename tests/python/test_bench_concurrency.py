"""`swiftinfer bench`: the JSON it prints is what bench/gpu_bench.sh compares with llama.cpp, so
its fields must be there and consistent with one another."""
import json

from conftest import run_cli


def test_concurrency_json_fields(binary, default_model):
    proc = run_cli("bench", "-m", default_model, "--device", "cpu", "-c", "1,3", "-p", "16",
                   "-n", "12", "-t", "1", "--json")
    rows = json.loads(proc.stdout)
    assert [r["concurrency"] for r in rows] == [1, 3]
    for r in rows:
        assert r["n_prompt"] == 16 and r["n_gen"] == 12
        # every request decodes 11 tokens after its first, and with -c 3 -p 16 the three
        # prompts fit one step: the window in which all of them decode is never empty
        assert r["all_decoding_tps"] > 0
        assert r["aggregate_tps"] > 0 and r["per_request_tps"] > 0
        assert 0 < r["ttft_mean_s"] < r["wall_s"]
    one, three = rows
    # with one request, "all decoding" is that request's decode: the tokens after its first
    # over first token to finish, which is its per-request rate
    assert abs(one["all_decoding_tps"] - one["per_request_tps"]) <= 0.01 * one["per_request_tps"]
    # three requests decoding together: more tokens per second than each of them alone gets
    assert three["all_decoding_tps"] > three["per_request_tps"]


def test_pp_tg_json_names_the_kv_cache(binary, default_model):
    """pp/tg rows name the KV cache they ran with (--kv-cache-dtype reaches the session)"""
    proc = run_cli("bench", "-m", default_model, "--device", "cpu", "-p", "8", "-n", "4", "-r",
                   "1", "-t", "1", "--bw", "20", "--json")
    out = json.loads(proc.stdout)
    assert out["kv_cache_dtype"] == "f16"
    assert [r["test"] for r in out["results"]] == ["pp8", "tg4"]


def test_memory_names_what_it_measured(binary):
    """`bench --memory` measures the roofline of the device it is told: the host's DRAM read
    bandwidth with --device cpu"""
    proc = run_cli("bench", "--memory", "--device", "cpu", "--memory-mib", "64", "-t", "1",
                   "--json")
    out = json.loads(proc.stdout)
    assert out["what"] == "dram read" and out["threads"] == 1
    assert out["bytes"] == 64 << 20 and out["runs"] == 5
    assert 0 < out["mean_gbps"] <= out["best_gbps"]


def test_memory_on_the_gpu_or_a_clear_error(binary):
    """with --device cuda, the GPU's copy bandwidth (bytes read + written) where a GPU is there;
    where none is (CI), the reason, not the host's bandwidth under the GPU's name"""
    proc = run_cli("bench", "--memory", "--device", "cuda", "--memory-mib", "64", "--json",
                   check=False)
    if proc.returncode == 0:
        out = json.loads(proc.stdout)
        assert out["what"] == "gpu copy" and out["threads"] == 0
        assert 0 < out["mean_gbps"] <= out["best_gbps"]
    else:
        assert proc.returncode > 0, f"killed by signal {-proc.returncode}"
        assert proc.stdout == b""
        err = proc.stderr.decode()
        assert "device cuda" in err and ("no CUDA GPU" in err or "without CUDA" in err), err
