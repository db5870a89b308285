"""Streaming (StreamingLLM attention sinks) through the CLI on a tiny synthetic model:
`swiftinfer perplexity` in its three modes, and a streaming generation whose KV block count
stays constant once the window is full (issue 4's constant-memory proof, in small)."""
import json
import math
import re

import pytest

from conftest import run_cli

TEXT = ("The licensee may copy and distribute verbatim copies of the program's source code as "
        "received, in any medium, provided that each copy carries an appropriate notice. ") * 12


@pytest.fixture(scope="module")
def tiny(binary, tmp_path_factory):
    d = tmp_path_factory.mktemp("streaming")
    model = d / "tiny.gguf"
    run_cli("synth", "-o", model, "--shape", "tiny")
    text = d / "text.txt"
    text.write_text(TEXT)
    return model, text


def ppl(model, text, *args):
    out = run_cli("perplexity", "-m", model, "-f", text, "-t", "2", "--json", "-q", *args,
                  timeout=120).stdout.decode()
    return json.loads(out)


def test_perplexity_modes_are_finite(tiny):
    model, text = tiny
    sinks = ppl(model, text, "--sink", "4", "--window", "60", "--chunk", "32")
    window = ppl(model, text, "--window", "64", "--no-sink", "--chunk", "32")
    full = ppl(model, text, "--ctx", "128")
    assert sinks["mode"] == "sinks" and window["mode"] == "window" and full["mode"] == "full"
    for r in (sinks, window, full):
        assert math.isfinite(r["ppl"]) and r["ppl"] > 1.0, r
    # streaming scores every token but the first, and the text is long enough to drop blocks
    assert sinks["n_scored"] == sinks["n_tokens"] - 1 > 4 * sinks["cache_tokens"]
    assert window["n_scored"] == window["n_tokens"] - 1
    # sink 4 -> one block, window 60 -> 4 blocks, plus the block being filled
    assert sinks["cache_tokens"] == 6 * 16 and window["cache_tokens"] == 5 * 16
    # the sink block changes what the window sees once blocks are dropped
    assert sinks["ppl"] != window["ppl"]


def test_streaming_without_drops_matches_full_context(tiny):
    """A window that never fills is dense attention: scoring the same tokens (the second half
    of one 128-token window) must give full mode's perplexity, up to the f16 rounding of keys
    stored un-rotated (rope_on_read) instead of rotated."""
    model, text = tiny
    full = ppl(model, text, "--ctx", "128", "--max-tokens", "128")
    stream = ppl(model, text, "--sink", "4", "--window", "128", "--max-tokens", "128",
                 "--score-from", "64")
    assert full["n_scored"] == stream["n_scored"] == 63
    assert stream["ppl"] == pytest.approx(full["ppl"], rel=2e-3)


def test_score_like_ctx_scores_full_modes_predictions(tiny):
    """--score-like-ctx N scores the same predictions as full mode with --ctx N over several
    windows (positions N/2 .. N-2 of each), so long-text comparisons are on equal tokens."""
    model, text = tiny
    full = ppl(model, text, "--ctx", "64", "--max-tokens", "320")
    stream = ppl(model, text, "--sink", "4", "--window", "60", "--max-tokens", "320",
                 "--score-like-ctx", "64")
    assert full["n_scored"] == stream["n_scored"] == 5 * 31
    # inside the first window nothing has been dropped yet: the first window's scores agree
    first = ppl(model, text, "--ctx", "64", "--max-tokens", "64")
    first_stream = ppl(model, text, "--sink", "4", "--window", "60", "--max-tokens", "64",
                       "--score-like-ctx", "64")
    assert first_stream["ppl"] == pytest.approx(first["ppl"], rel=2e-3)
    assert run_cli("perplexity", "-m", model, "-f", text, "--ctx", "64", "--score-like-ctx",
                   "64", check=False).returncode != 0


def test_streaming_generation_has_constant_kv_blocks(tiny):
    model, _ = tiny
    proc = run_cli("run", "-m", model, "-p", "Once upon a time", "--parallel", "1",
                   "--stream-sink", "4", "--stream-window", "60", "--stats-every", "250",
                   "-n", "3000", "--ignore-eos", "--greedy", "-t", "1", timeout=120)
    lines = re.findall(r"stream: tokens (\d+), kv blocks used (\d+)/(\d+), rss (\d+) KiB",
                       proc.stderr.decode())
    assert [int(t) for t, *_ in lines] == list(range(250, 3001, 250))
    used = [int(u) for _, u, _, _ in lines]
    # the last line may come after the engine finished the request (0 blocks then)
    assert used[-1] in (0, used[-2]), used
    # after warm-up (the window filled) the cache holds 1 sink + 4 window blocks + 1 filling
    assert all(u == used[1] for u in used[1:-1]), used
    assert 5 <= used[1] <= 6, used
