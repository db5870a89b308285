"""Shared fixtures: where the built binaries and the default model are."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SI_BUILD_DIR", ROOT / "build"))
BINARY = BUILD / "swiftinfer"
DEFAULT_MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def binary():
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: build first (make build-test)")
    return BINARY


@pytest.fixture(scope="session")
def default_model():
    if not DEFAULT_MODEL.exists():
        pytest.skip(f"{DEFAULT_MODEL} is absent: run scripts/setup.sh to fetch it")
    return DEFAULT_MODEL


def run_cli(*args, input=None, check=True, timeout=600):
    """Runs the swiftinfer binary; returns the CompletedProcess (bytes)."""
    proc = subprocess.run([str(BINARY), *map(str, args)], input=input, capture_output=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"swiftinfer {' '.join(map(str, args))} failed "
                             f"({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return proc
