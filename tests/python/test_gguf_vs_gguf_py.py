"""Our GGUF reader against the `gguf` PyPI package's GGUFReader on the default model.

Runs `swiftinfer info MODEL` (binary: $SI_BUILD_DIR/swiftinfer, default /work/main/build) and
parses its line-oriented output (format documented at the top of src/cli/cmd_info.c): every
key must be present with the same type and value (scalars, strings, array element type and
length, and the first elements that `info` prints), and every tensor must have the same name,
type, shape, offset and byte size. Skipped when the model file is absent.
"""
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf PyPI package is not installed")
from gguf import GGUFReader, GGUFValueType  # noqa: E402

ROOT = Path(os.environ.get("SI_SOURCE_DIR", Path(__file__).resolve().parents[2]))
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
BINARY = Path(os.environ.get("SI_BUILD_DIR", "/work/main/build")) / "swiftinfer"

VTYPE_NAMES = {
    GGUFValueType.UINT8: "uint8", GGUFValueType.INT8: "int8", GGUFValueType.UINT16: "uint16",
    GGUFValueType.INT16: "int16", GGUFValueType.UINT32: "uint32", GGUFValueType.INT32: "int32",
    GGUFValueType.FLOAT32: "float32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "uint64", GGUFValueType.INT64: "int64",
    GGUFValueType.FLOAT64: "float64",
}


def _unquote(b: bytes, i: int):
    """Parses the quoted string starting at b[i] == '"'; returns (bytes, index after it)."""
    assert b[i:i + 1] == b'"', b[i:i + 20]
    out = bytearray()
    i += 1
    simple = {ord("n"): 10, ord("t"): 9, ord("r"): 13, ord("\\"): 92, ord('"'): 34}
    while b[i] != ord('"'):
        c = b[i]
        if c == ord("\\"):
            e = b[i + 1]
            if e == ord("x"):
                out.append(int(b[i + 2:i + 4], 16))
                i += 4
                continue
            out.append(simple[e])
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out), i + 1


def _parse_elems(elem_type: str, body: bytes):
    """The elements printed inside [...] (without a trailing '...')."""
    assert body.startswith(b"[") and body.endswith(b"]"), body[:40]
    inner = body[1:-1]
    if elem_type == "string":
        out, i = [], 0
        while i < len(inner):
            if inner[i:i + 3] == b"...":
                break
            s, i = _unquote(inner, i)
            out.append(s)
            if inner[i:i + 2] == b", ":
                i += 2
        return out
    if elem_type == "array":
        return None  # nested arrays: only the outer type and length are compared
    return [x for x in inner.decode().split(", ") if x and x != "..."]


def _run_info(path: Path):
    if not BINARY.exists():
        pytest.fail(f"{BINARY} not found: build it first (or set SI_BUILD_DIR)")
    res = subprocess.run([str(BINARY), "info", str(path)], capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    header, kvs, tensors = {}, {}, []
    for line in res.stdout.split(b"\n"):
        if line.startswith(b"kv "):
            key, vtype, rest = line[3:].split(b" ", 2)
            kvs[key.decode()] = (vtype.decode(), rest)
        elif line.startswith(b"tensor "):
            _, idx, name, ttype, shape, off, nbytes = line.split(b" ")
            tensors.append((int(idx), name.decode(), ttype.decode(),
                            [int(x) for x in shape.split(b"x")], int(off), int(nbytes)))
        elif b": " in line and not line.startswith(b"#") and not line.startswith(b"total"):
            k, v = line.split(b": ", 1)
            header[k.decode()] = v.decode()
    return header, kvs, tensors


def _check_scalar(key, vtype, text: bytes, field):
    val = field.parts[field.data[0]]
    if vtype == "string":
        s, end = _unquote(text, 0)
        assert end == len(text), key
        assert s == bytes(val), key
    elif vtype == "bool":
        assert text.decode() == ("true" if bool(val[0]) else "false"), key
    elif vtype in ("float32", "float64"):
        dt = np.float32 if vtype == "float32" else np.float64
        assert dt(float(text)) == dt(val[0]), key
    else:
        assert int(text) == int(val[0]), key


def test_info_matches_gguf_py():
    if not MODEL.exists():
        pytest.skip(f"model file {MODEL} is absent (fetched by the set-up step)")
    header, kvs, tensors = _run_info(MODEL)
    r = GGUFReader(str(MODEL))

    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    assert int(header["version"]) == int(r.fields["GGUF.version"].parts[-1][0])
    assert int(header["n_kv"]) == len(fields)
    assert set(kvs) == set(fields)
    for key, field in fields.items():
        vtype, rest = kvs[key]
        t0 = field.types[0]
        if t0 != GGUFValueType.ARRAY:
            assert vtype == VTYPE_NAMES[t0], key
            _check_scalar(key, vtype, rest, field)
            continue
        elem = VTYPE_NAMES[field.types[1]] if len(field.types) > 1 else "uint8"
        assert vtype == f"array[{elem}]", key
        n, body = rest.split(b" ", 1)
        assert int(n) == len(field.data), key
        shown = _parse_elems(elem, body)
        if shown is None:
            continue
        assert len(shown) == min(len(field.data), 8), key
        for i, got in enumerate(shown):
            want = field.parts[field.data[i]]
            if elem == "string":
                assert got == bytes(want), (key, i)
            elif elem == "bool":
                assert got == ("true" if bool(want[0]) else "false"), (key, i)
            elif elem in ("float32", "float64"):
                dt = np.float32 if elem == "float32" else np.float64
                assert dt(float(got)) == dt(want[0]), (key, i)
            else:
                assert int(got) == int(want[0]), (key, i)

    assert int(header["n_tensors"]) == len(r.tensors) == len(tensors)
    data_offset = int(header["data_offset"])
    assert data_offset == r.data_offset
    for (idx, name, ttype, shape, off, nbytes), rt in zip(tensors, r.tensors):
        assert name == rt.name
        assert ttype.upper() == rt.tensor_type.name, name
        assert shape == [int(x) for x in rt.shape], name
        assert data_offset + off == rt.data_offset, name
        assert nbytes == int(rt.n_bytes), name
