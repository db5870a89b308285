"""SwiftInfer's Python API: the C library (libswiftinfer.so) through ctypes.

    import swiftinfer
    model = swiftinfer.Model("models/SmolLM2-135M-Instruct.Q4_1.gguf")
    with swiftinfer.Engine(model) as engine:
        print(engine.generate("The capital of France is", max_tokens=16).text)
        for tok in engine.stream("Once upon a time", max_tokens=32, temperature=0.7, seed=1):
            print(tok.text, end="", flush=True)

The library is found through SWIFTINFER_LIB (its path), else the repository's build/ directory
(or SI_BUILD_DIR), else the system's library path.
"""
from ._capi import SwiftInferError
from .engine import Completion, Engine, Stream, Token
from .model import Model

__all__ = ["Model", "Engine", "Stream", "Token", "Completion", "SwiftInferError"]
