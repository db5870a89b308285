#!/usr/bin/env python3
"""plot_gpu.py DIR PNG — issue 6's Llama-2-7B GPU numbers as a chart: for each weight type,
SwiftInfer's pp2048, tg128 and 64-sequence decode rate (the *.bench.json / *.batched.json files
bench/gpu_bench.sh writes; *.batchedfp8.json: the same with --kv-cache-dtype fp8) beside upstream llama.cpp's reference numbers from the issue and,
for f16, Hugging Face transformers (hf_baseline.log's JSON line, when DIR has it)."""
import json
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# issue 6: llama.cpp (Aug 2026, CUDA, flash attention) on the same H200 and shape
LLAMA_CPP = {"f16": (18961, 224, 4753), "q8_0": (11127, 273, None), "q4_0": (11009, 359, 3857)}
TYPES = ["f16", "bf16", "q8_0", "q4_0", "q4_k"]
TESTS = ["pp2048 t/s", "tg128 t/s", "64 x (512+128) all-decoding t/s"]


def ours(d, t):
    bench = d / f"llama2-7b-{t}.bench.json"
    batched = d / f"llama2-7b-{t}.batched.json"
    if not bench.exists():
        return None
    rows = {r["test"]: r["avg_ts"] for r in json.loads(bench.read_text())["results"]}
    dec = None
    if batched.exists():
        b = json.loads(batched.read_text())
        b = b[0] if isinstance(b, list) else b
        b = b.get("results", [b])[0] if isinstance(b, dict) and "results" in b else b
        # the rate while all 64 decode (batched-bench's S_TG); older runs lack it
        dec = b.get("all_decoding_tps") or b["per_request_tps"] * b["concurrency"]
    return rows.get("pp2048"), rows.get("tg128"), dec


def ours_fp8(d, t):
    f = d / f"llama2-7b-{t}.batchedfp8.json"
    if not f.exists():
        return 0
    b = json.loads(f.read_text())
    return (b[0] if isinstance(b, list) else b).get("all_decoding_tps") or 0


def hf(d):
    log = d / "hf_baseline.log"
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            return j["prefill"]["tps"], j["decode"]["tps"], j["batched"]["decode_tps"]
    return None


def main():
    d, png = pathlib.Path(sys.argv[1]), sys.argv[2]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    base = hf(d)
    for k, (ax, test) in enumerate(zip(axes, TESTS)):
        labels, vals, fp8s, refs, hfs = [], [], [], [], []
        for t in TYPES:
            o = ours(d, t)
            if o is None or o[k] is None:
                continue
            labels.append(t)
            vals.append(o[k])
            fp8s.append(ours_fp8(d, t) if k == 2 else 0)
            refs.append((LLAMA_CPP.get(t) or (None,) * 3)[k] or 0)
            hfs.append(base[k] if base and t == "f16" else 0)
        x = range(len(labels))
        w = 0.21
        ax.bar([i - 1.5 * w for i in x], vals, w, label="SwiftInfer")
        ax.bar([i - 0.5 * w for i in x], fp8s, w, label="SwiftInfer, fp8 KV cache")
        ax.bar([i + 0.5 * w for i in x], refs, w, label="llama.cpp (issue 6 reference)")
        ax.bar([i + 1.5 * w for i in x], hfs, w, label="HF transformers fp16 (same GPU)")
        ax.set_xticks(list(x), labels)
        ax.set_title(test)
        ax.set_ylabel("tokens/s")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=4, fontsize=9)
    fig.suptitle("Llama-2-7B shape, random weights, NVIDIA H200 (bars at 0: no reference)")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
