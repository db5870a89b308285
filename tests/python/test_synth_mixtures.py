"""`swiftinfer synth --type q3_k_m|q4_k_m|q5_k_m` against llama.cpp's mixture rules, read back
with the `gguf` PyPI package's GGUFReader (not our reader): every tensor's type as
llama_tensor_get_type gives it for a llama model (attn_v, ffn_down, attn_output, output), on
the tiny shape and on a 16-layer one whose 320-wide rows take the fallbacks."""
import pytest

from conftest import run_cli

gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType


def more_bits(il, n):
    """llama.cpp's use_more_bits (the layers of a Q4_K_M/Q5_K_M whose attn_v, ffn_down are Q6_K)"""
    return il < n // 8 or il >= 7 * n // 8 or (il - n // 8) % 3 == 2


FALLBACK = {T.Q3_K: T.Q4_0, T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}


def expected(base, name, n_layer, n_cols):
    """the type llama.cpp's _K_M mixture around base gives tensor `name` (rows of n_cols)"""
    t = base
    il = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if name == "output.weight":
        t = T.Q6_K
    elif il >= 0 and base == T.Q3_K:
        if ".attn_v." in name:
            t = T.Q5_K if il < 2 else T.Q4_K
        elif ".ffn_down." in name:
            t = T.Q5_K if il < n_layer // 16 else T.Q4_K
        elif ".attn_output." in name:
            t = T.Q4_K
    elif il >= 0 and (".attn_v." in name or ".ffn_down." in name) and more_bits(il, n_layer):
        t = T.Q6_K
    return t if n_cols % 256 == 0 else FALLBACK[t]


@pytest.mark.parametrize("mix,base", [("q3_k_m", T.Q3_K), ("q4_k_m", T.Q4_K),
                                      ("q5_k_m", T.Q5_K)])
@pytest.mark.parametrize("dims", [[], ["--n-layer", "16", "--n-embd", "320", "--n-head", "5",
                                       "--n-head-kv", "5", "--n-ff", "768"]],
                         ids=["tiny", "16-layers-320"])
def test_synth_mixture_types(binary, tmp_path, mix, base, dims):
    out = tmp_path / f"{mix}.gguf"
    run_cli("synth", "-o", out, "--type", mix, *dims)
    n_layer = int(dims[1]) if dims else 2
    r = gguf.GGUFReader(out)
    weights = [t for t in r.tensors if len(t.shape) == 2]
    assert len(weights) == 2 + 7 * n_layer  # token_embd, output, 7 matrices a layer
    seen = set()
    for t in weights:
        want = expected(base, t.name, n_layer, int(t.shape[0]))
        assert t.tensor_type == want, f"{mix}: {t.name} is {t.tensor_type.name}, not {want.name}"
        seen.add(t.tensor_type)
    assert len(seen) >= 2, seen  # a mixture, not one type
