"""test_quant_vs_gguf.py — our scalar dequantisers/quantisers against the gguf package's numpy ones.

The gguf package (gguf-py, shipped with llama.cpp) is an independent implementation of the GGUF
block layouts. For every type we build random blocks (random payload bytes, finite random fp16
scale fields), dequantise them with libswiftinfer.so (through the quant_traits table, via ctypes)
and with gguf.quants.dequantize, and require bit-exact equality: both evaluate the same float32
expressions in the same order (d * q, d * q + m, (d * sc) * q - dmin * m), so no type needs an
ulp tolerance. Where gguf also has a quantiser (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) our
from_float bytes must equal its bytes. gguf has no Q8_1 / Q8_K code: those are checked against
the plain d * q formula written here.

Run: SI_BUILD_DIR=build python3 -m pytest tests/python/test_quant_vs_gguf.py
"""
import ctypes
import os

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as GT  # noqa: E402

LIB_PATH = os.path.join(os.environ.get("SI_BUILD_DIR", "/work/main/build"), "libswiftinfer.so")

TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)
FROM_FLOAT = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_int64)
VEC_DOT = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


class QuantTraits(ctypes.Structure):
    """Mirror of quant_traits in src/quant/quant.h."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("block_size", ctypes.c_int32),
        ("type_size", ctypes.c_int32),
        ("vec_dot_type", ctypes.c_int),
        ("to_float", TO_FLOAT),
        ("from_float", FROM_FLOAT),
        ("vec_dot", VEC_DOT),
    ]


@pytest.fixture(scope="module")
def lib():
    if not os.path.exists(LIB_PATH):
        pytest.skip(f"{LIB_PATH} not built")
    so = ctypes.CDLL(LIB_PATH)
    so.quant_get.restype = ctypes.POINTER(QuantTraits)
    so.quant_get.argtypes = [ctypes.c_int]
    return so


# type -> (block bytes, elements per block, byte offsets of fp16 fields, offset of float32 field)
LAYOUT = {
    GT.F32: (4, 1, [], [0]),
    GT.F16: (2, 1, [0], []),
    GT.BF16: (2, 1, [], []),
    GT.Q4_0: (18, 32, [0], []),
    GT.Q4_1: (20, 32, [0, 2], []),
    GT.Q5_0: (22, 32, [0], []),
    GT.Q5_1: (24, 32, [0, 2], []),
    GT.Q8_0: (34, 32, [0], []),
    GT.Q8_1: (36, 32, [0, 2], []),
    GT.Q2_K: (84, 256, [80, 82], []),
    GT.Q3_K: (110, 256, [108], []),
    GT.Q4_K: (144, 256, [0, 2], []),
    GT.Q5_K: (176, 256, [0, 2], []),
    GT.Q6_K: (210, 256, [208], []),
    GT.Q8_K: (292, 256, [], [0]),
    GT.IQ4_NL: (18, 32, [0], []),
    GT.IQ4_XS: (136, 256, [0], []),
}

N_BLOCKS = 1024


def finite_f16_bits(rng, n):
    """Random fp16 bit patterns over the whole finite range (subnormals included), no inf/NaN."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    bad = ((bits >> 10) & 0x1F) == 0x1F
    bits[bad] &= np.uint16(0xBFFF)  # clear the top exponent bit
    return bits


def random_blocks(rng, qt):
    size, _, f16_offsets, f32_offsets = LAYOUT[qt]
    raw = rng.integers(0, 256, size=(N_BLOCKS, size), dtype=np.uint8)
    if qt == GT.BF16:
        bits = raw.view(np.uint16)
        bad = ((bits >> 7) & 0xFF) == 0xFF
        bits[bad] &= np.uint16(0xBFFF)
    for off in f16_offsets:
        raw[:, off:off + 2] = finite_f16_bits(rng, N_BLOCKS).view(np.uint8).reshape(N_BLOCKS, 2)
    for off in f32_offsets:
        vals = (rng.standard_normal(N_BLOCKS) * 10.0 ** rng.integers(-6, 4, N_BLOCKS)).astype(np.float32)
        raw[:, off:off + 4] = vals.view(np.uint8).reshape(N_BLOCKS, 4)
    return np.ascontiguousarray(raw.reshape(-1))


def our_to_float(lib, qt, raw):
    tr = lib.quant_get(int(qt)).contents
    n = raw.size // tr.type_size * tr.block_size
    out = np.full(n, np.nan, dtype=np.float32)  # poisoned
    tr.to_float(raw.ctypes.data, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n)
    return out


def our_from_float(lib, qt, x):
    tr = lib.quant_get(int(qt)).contents
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.full(x.size // tr.block_size * tr.type_size, 0xA5, dtype=np.uint8)  # poisoned
    tr.from_float(x.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.ctypes.data, x.size)
    return out


def reference_dequant(qt, raw):
    if qt == GT.Q8_1:  # not in gguf: x = d * q
        b = raw.reshape(-1, 36)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (d * b[:, 4:].view(np.int8)).reshape(-1)
    if qt == GT.Q8_K:  # not in gguf: x = d * q, d float32
        b = raw.reshape(-1, 292)
        d = b[:, 0:4].copy().view(np.float32)
        return (d * b[:, 4:260].view(np.int8)).reshape(-1)
    return np.asarray(gguf.quants.dequantize(raw, qt), dtype=np.float32).reshape(-1)


@pytest.mark.parametrize("qt", list(LAYOUT), ids=lambda t: t.name)
def test_traits_match_gguf_sizes(lib, qt):
    tr = lib.quant_get(int(qt)).contents
    size, bs, _, _ = LAYOUT[qt]
    assert (tr.type_size, tr.block_size) == (size, bs)
    # NOTE: gguf-py still lists Q8_1 as 40 bytes (an old float d, float s layout); ggml's
    # block_q8_1 is {half d, half s, int8 qs[32]} = 36. Q8_1 never appears in files.
    if qt in gguf.constants.GGML_QUANT_SIZES and qt != GT.Q8_1:
        assert gguf.constants.GGML_QUANT_SIZES[qt] == (bs, size)


@pytest.mark.parametrize("qt", list(LAYOUT), ids=lambda t: t.name)
def test_dequantize_matches_gguf(lib, qt):
    rng = np.random.default_rng(1234 + int(qt))
    raw = random_blocks(rng, qt)
    ours = our_to_float(lib, qt, raw)
    ref = reference_dequant(qt, raw)
    assert ours.shape == ref.shape
    assert np.all(np.isfinite(ref))
    # bit-exact (as float values: +0 == -0 is the only slack allowed)
    np.testing.assert_array_equal(ours, ref)


QUANTISERS = [GT.F16, GT.BF16, GT.Q4_0, GT.Q4_1, GT.Q5_0, GT.Q5_1, GT.Q8_0]


@pytest.mark.parametrize("qt", QUANTISERS, ids=lambda t: t.name)
def test_quantize_matches_gguf(lib, qt):
    rng = np.random.default_rng(99 + int(qt))
    bs = LAYOUT[qt][1]
    n = 1024 * 32
    # mix of scales per block so that d spans many fp16 exponents; some all-zero blocks
    x = rng.standard_normal(n).astype(np.float32)
    scale = (10.0 ** rng.uniform(-4, 3, n // 32)).astype(np.float32)
    x = (x.reshape(-1, 32) * scale[:, None]).reshape(-1)
    x[:64] = 0.0
    x[64:96] = 1.0  # constant block
    ours = our_from_float(lib, qt, x)
    ref = np.asarray(gguf.quants.quantize(x.reshape(-1, bs * 32), qt)).view(np.uint8).reshape(-1)
    assert ours.size == ref.size
    mism = np.nonzero(ours != ref)[0]
    assert mism.size == 0, f"{mism.size} bytes differ, first at byte {mism[0]}"


def test_q8_1_sum_field(lib):
    """s = fp16(d * sum(q)) with d the unrounded amax / 127 (ggml's quantize_row_q8_1_ref)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal(1024 * 32).astype(np.float32)
    raw = our_from_float(lib, GT.Q8_1, x).reshape(-1, 36)
    blocks = x.reshape(-1, 32)
    d = np.abs(blocks).max(axis=1) / np.float32(127)
    qs = raw[:, 4:].view(np.int8).astype(np.int32)
    s = (qs.sum(axis=1).astype(np.float32) * d).astype(np.float16)
    np.testing.assert_array_equal(raw[:, 2:4].copy().view(np.float16).reshape(-1), s)
    # the q8_1 payload is the q8_0 one
    q8_0 = our_from_float(lib, GT.Q8_0, x).reshape(-1, 34)
    np.testing.assert_array_equal(raw[:, 4:], q8_0[:, 2:])
    np.testing.assert_array_equal(raw[:, 0:2], q8_0[:, 0:2])
