"""How many tokens of a real model's rows survive the sampler's exact top-p pre-filter.

The GPU sampler (src/backend/cuda/sample.cu) finishes top-p in one CTA when at most 128 tokens
survive its pre-filter (probability >= (1 - top_p) / n_vocab at temperature 1); otherwise a radix
selection narrows the row. This counts, step by step while sampling at t 0.8 / top-p 0.95, the
pre-filter's survivors and the nucleus itself, with llama-cpp-python's logits (an implementation
we did not write) on the default model.

    .venv/bin/python bench/topp_survivors.py [MODEL.gguf]
"""
import sys

import numpy as np
from llama_cpp import Llama

PROMPTS = [
    "Write a short story about a dragon who learns to bake bread.",
    "Explain how a refrigerator works.",
    "List ten creative names for a coffee shop.",
]
STEPS, TOP_P, TEMP = 120, 0.95, 0.8


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    llm = Llama(model_path=path, logits_all=True, verbose=False, n_ctx=1024)
    rng = np.random.default_rng(1)
    survivors, nucleus = [], []
    for text in PROMPTS:
        chat = f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        llm.reset()
        llm.eval(llm.tokenize(chat.encode(), special=True))
        for _ in range(STEPS):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
            p = np.exp(logits - logits.max())
            p /= p.sum()
            survivors.append(int((p >= (1 - TOP_P) / p.size).sum()))
            order = np.argsort(-p)
            k = int(np.searchsorted(np.cumsum(p[order]), TOP_P) + 1)
            nucleus.append(k)
            keep = order[:k]
            q = np.exp((logits[keep] - logits.max()) / TEMP)
            llm.eval([int(rng.choice(keep, p=q / q.sum()))])
    s, k = np.array(survivors), np.array(nucleus)
    print(f"{path}: vocabulary {p.size}, {s.size} steps")
    for limit in (128, 256, 512, 1024, 2048, 4096):
        print(f"  pre-filter survivors <= {limit}: {100 * (s <= limit).mean():.1f} %")
    print("  survivors, 10th / 50th / 90th percentile:", np.percentile(s, [10, 50, 90]))
    print("  nucleus (top-p 0.95), 10th / 50th / 90th percentile:", np.percentile(k, [10, 50, 90]))


if __name__ == "__main__":
    main()
