#!/usr/bin/env python3
"""hf_baseline.py — issue 6's independent baseline: Hugging Face transformers on the same GPU,
Llama-2-7B shape, random fp16 weights created on the GPU (no download, no disk: runs offline).

Measures, like `swiftinfer bench` and bench/gpu_bench.sh:
  prefill   one prompt of --prompt tokens (default 2048), one forward pass: tokens/s
  decode    batch 1, --gen new tokens (default 128) from a 1-token prompt through generate()
            (eager, the default dynamic KV cache): new tokens/s
  batched   --batch sequences (default 64) of --batch-prompt tokens (512) + --gen new tokens
            through generate(): generated tokens / wall time ("e2e", prefill included), and
            the decode-only rate 64 x (gen - 1) / (T(gen) - T(1)) from a second run that
            generates one token
  --compile adds batch-1 decode with a static cache and torch.compile (compiling takes minutes)

Prints progress to stderr, then a markdown table and one JSON line (last line of stdout).
Written against transformers 4.40 to 5.x: the model is built from a LlamaConfig under a default
device and dtype (no from_pretrained, no dtype/torch_dtype argument, whose name changed), SDPA
attention asked for through the config, generation through generate() only.
"""
import argparse
import contextlib
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: defaults become prompt 512, gen 32, batch 8 x 128, 1 rep")
    ap.add_argument("--compile", action="store_true",
                    help="also batch-1 decode with a static cache + torch.compile")
    ap.add_argument("--prompt", type=int, help="prefill prompt length (2048)")
    ap.add_argument("--gen", type=int, help="new tokens per sequence (128)")
    ap.add_argument("--batch", type=int, help="sequences in the batched run (64)")
    ap.add_argument("--batch-prompt", type=int, help="prompt length in the batched run (512)")
    ap.add_argument("--reps", type=int, help="timed repetitions after a warm-up (3)")
    ap.add_argument("--layers", type=int, default=32, help="decoder layers (32: Llama-2-7B)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="float16", choices=sorted(DTYPES))
    ap.add_argument("--json-out", help="also write the JSON result to this file")
    a = ap.parse_args()
    defaults = dict(prompt=512, gen=32, batch=8, batch_prompt=128, reps=1) if a.quick else \
        dict(prompt=2048, gen=128, batch=64, batch_prompt=512, reps=3)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.gen < 2:
        ap.error("--gen must be at least 2 (the batched decode-only rate needs it)")
    return a


@contextlib.contextmanager
def default_device_dtype(device, dtype):
    """Parameters are created where and as they will live: no fp32 copy on the host."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(old)


def build_model(a):
    # Llama-2-7B: hidden 4096, FFN 11008, 32 heads (no GQA), vocab 32000, RoPE base 10000 and
    # RMSNorm eps 1e-5 (LlamaConfig's defaults in every version; not passed, as 5.x moved RoPE
    # settings into rope_parameters). No special tokens: random weights may emit any id, and
    # generate() must not stop early at an EOS.
    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=a.layers,
                         num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                         max_position_embeddings=4096, rms_norm_eps=1e-5,
                         tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                         pad_token_id=None, attn_implementation="sdpa")
    torch.manual_seed(0)
    with default_device_dtype(a.device, DTYPES[a.dtype]):
        # The init draws N(0, 0.02) on the device: a fraction of a second on a GPU.
        model = LlamaForCausalLM(config)
    model.eval()
    gc = model.generation_config
    gc.eos_token_id = None
    gc.bos_token_id = None
    gc.pad_token_id = 0  # batched inputs carry no padding; this only silences a warning
    gc.do_sample = False
    return model


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device, reps, warmup=None):
    """One untimed warm-up call (of warmup, else fn), then reps timed calls of fn; seconds."""
    (warmup or fn)()
    sync(device)
    out = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        out.append(time.perf_counter() - t0)
    return out


def random_ids(rows, cols, device, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, 32000, (rows, cols), generator=g).to(device)


def generate(model, ids, n_new):
    out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                         min_new_tokens=n_new, do_sample=False)
    got = out.shape[1] - ids.shape[1]
    if got != n_new:
        raise RuntimeError(f"generate() made {got} tokens, not {n_new}")
    return out


def bench_prefill(model, a):
    ids = random_ids(1, a.prompt, a.device, 1)

    def run():
        model(input_ids=ids, use_cache=False)

    secs = timed(run, a.device, a.reps)
    return {"tokens": a.prompt, "seconds": secs, "tps": a.prompt / statistics.median(secs)}


def bench_decode(model, a):
    ids = random_ids(1, 1, a.device, 2)
    secs = timed(lambda: generate(model, ids, a.gen), a.device, a.reps)
    return {"new_tokens": a.gen, "seconds": secs, "tps": a.gen / statistics.median(secs)}


def bench_batched(model, a):
    ids = random_ids(a.batch, a.batch_prompt, a.device, 3)
    reps = max(1, min(a.reps, 2))  # each repetition is 64 x 640 tokens
    # warm-up: two tokens at the full batch (kernels and allocator at these shapes), once
    one = timed(lambda: generate(model, ids, 1), a.device, reps,
                warmup=lambda: generate(model, ids, 2))
    full = timed(lambda: generate(model, ids, a.gen), a.device, reps, warmup=lambda: None)
    t_full, t_one = statistics.median(full), statistics.median(one)
    return {"sequences": a.batch, "prompt": a.batch_prompt, "new_tokens": a.gen,
            "seconds": full, "seconds_gen1": one,
            "e2e_tps": a.batch * a.gen / t_full,
            "decode_tps": a.batch * (a.gen - 1) / (t_full - t_one) if t_full > t_one else None}


def bench_compiled_decode(model, a):
    """Static cache + torch.compile (HF's documented recipe); the warm-ups compile. Versions
    with CompileConfig (4.48+) compile the forward inside generate() when the cache is static;
    older ones need it compiled by hand."""
    model.generation_config.cache_implementation = "static"
    if not hasattr(transformers, "CompileConfig"):
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = random_ids(1, 1, a.device, 2)
    t0 = time.perf_counter()
    generate(model, ids, a.gen)  # compiles; timed() adds one more warm-up for the CUDA graphs
    log(f"compiled in {time.perf_counter() - t0:.0f} s")
    secs = timed(lambda: generate(model, ids, a.gen), a.device, a.reps)
    return {"new_tokens": a.gen, "seconds": secs, "tps": a.gen / statistics.median(secs)}


def fmt(x, spec="{:,.1f}"):
    return "—" if x is None else spec.format(x)


def main():
    a = parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("hf_baseline: no CUDA device (use --device cpu for a CPU smoke test)")
    gpu = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else "cpu"
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {gpu}")
    t0 = time.perf_counter()
    model = build_model(a)
    sync(a.device)
    n_params = sum(p.numel() for p in model.parameters())
    attn = getattr(model.config, "_attn_implementation", "?")
    log(f"model: {n_params / 1e9:.2f} B parameters, {a.dtype}, attention {attn}, "
        f"built in {time.perf_counter() - t0:.1f} s")

    res = {"torch": torch.__version__, "transformers": transformers.__version__, "gpu": gpu,
           "dtype": a.dtype, "layers": a.layers, "n_params": n_params, "attention": attn}
    with torch.inference_mode():
        log(f"prefill: 1 x {a.prompt}")
        res["prefill"] = bench_prefill(model, a)
        log(f"  {res['prefill']['tps']:,.0f} tokens/s")
        log(f"decode: batch 1, {a.gen} new tokens, eager, dynamic cache")
        res["decode"] = bench_decode(model, a)
        log(f"  {res['decode']['tps']:,.1f} tokens/s")
        log(f"batched: {a.batch} x ({a.batch_prompt} + {a.gen})")
        res["batched"] = bench_batched(model, a)
        b = res["batched"]
        log(f"  e2e {b['e2e_tps']:,.0f} t/s, decode {fmt(b['decode_tps'], '{:,.0f}')} t/s")
        if a.compile:
            log("decode: batch 1, static cache + torch.compile (compiling)")
            try:
                res["decode_compiled"] = bench_compiled_decode(model, a)
                log(f"  {res['decode_compiled']['tps']:,.1f} tokens/s")
            except Exception as e:  # a compile failure must not lose the eager numbers
                res["decode_compiled"] = {"error": f"{type(e).__name__}: {e}"[:500]}
                log(f"  FAILED: {res['decode_compiled']['error']}")
    if a.device.startswith("cuda"):
        res["max_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30

    comp = res.get("decode_compiled", {}).get("tps")
    print(f"Hugging Face transformers {transformers.__version__} (torch {torch.__version__}), "
          f"{gpu}, Llama-2-7B shape ({a.layers} layers), random {a.dtype} weights, SDPA\n")
    print(f"| prefill {a.prompt} t/s | decode b=1 eager t/s | decode b=1 static+compile t/s "
          f"| {a.batch} x ({a.batch_prompt}+{a.gen}) e2e t/s | decode-only t/s |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {res['prefill']['tps']:,.0f} | {res['decode']['tps']:,.1f} | {fmt(comp)} "
          f"| {res['batched']['e2e_tps']:,.0f} | {fmt(res['batched']['decode_tps'], '{:,.0f}')} |")
    line = json.dumps(res)
    if a.json_out:
        with open(a.json_out, "w") as f:
            f.write(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
