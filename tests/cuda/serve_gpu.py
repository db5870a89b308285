#!/usr/bin/env python3
"""serve_gpu.py — `swiftinfer serve --device cuda` end to end, for tests/cuda/run.sh.

Starts the server three times on MODEL: with no KV option (on a GPU the pool is then 0.9 of the
free memory less weights and scratch, vLLM's default, far above the engine's 1 GiB), with
--gpu-memory-fraction 0.5 (a smaller pool than the default) and with --kv-memory 256 (that budget,
not a fraction). Each time one completion of 8 tokens must come back over HTTP, and the pool's
size is read from the server's start-up line ("KV pool N blocks (M MiB, ...)"). On the first,
logit_bias and penalties go through the server to the GPU: +100 on token 42 makes 4 greedy tokens
4 copies of the one it gives alone, a request with frequency, presence and repetition penalties
(sampled, seeded) gives its 16 tokens, and /metrics then says no step was sampled on the host
(swiftinfer_engine_host_sampled_steps_total 0: both were applied on the device).

usage: tests/cuda/serve_gpu.py BINARY MODEL        (prints PASS/FAIL lines; exit 1 on a FAIL)
Standard library only."""
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base, body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def probe_sampling(base):
    """(forced text alone, forced text of 4 tokens, penalised completion tokens, host-sampled
    steps from /metrics)"""
    forced = {"prompt": "Hello", "temperature": 0, "ignore_eos": True, "logit_bias": {"42": 100}}
    one = post(base, {**forced, "max_tokens": 1})["choices"][0]["text"]
    four = post(base, {**forced, "max_tokens": 4})["choices"][0]["text"]
    pen = post(base, {"prompt": "Hello", "max_tokens": 16, "temperature": 0.8, "seed": 1,
                      "ignore_eos": True, "frequency_penalty": 0.5, "presence_penalty": 0.3,
                      "repetition_penalty": 1.1})["usage"]["completion_tokens"]
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        metrics = r.read().decode()
    m = re.search(r"^swiftinfer_engine_host_sampled_steps_total (\d+)", metrics, re.M)
    return one, four, pen, (int(m.group(1)) if m else None)


def serve_once(binary, model, extra, probe=False):
    """(KV MiB from the log or None, completion tokens or None, the log's last lines,
    probe_sampling's result when probe)"""
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([binary, "serve", "-m", model, "--device", "cuda", "--host",
                             "127.0.0.1", "--port", str(port), *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    tokens = probed = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.2)
        if proc.poll() is None:
            body = json.dumps({"prompt": "Hello", "max_tokens": 8, "temperature": 0,
                               "ignore_eos": True}).encode()
            req = urllib.request.Request(base + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                tokens = json.load(r)["usage"]["completion_tokens"]
            if probe:
                probed = probe_sampling(base)
    except OSError as e:
        print(f"INFO request failed: {e}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    log.seek(0)
    text = log.read().decode(errors="replace")
    m = re.search(r"KV pool (\d+) blocks \((\d+) MiB", text)
    return (int(m.group(2)) if m else None), tokens, text.strip().splitlines()[-3:], probed


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[-1])
    binary, model = sys.argv[1], sys.argv[2]
    fails = 0

    def check(ok, what):
        nonlocal fails
        fails += not ok
        print(("PASS " if ok else "FAIL ") + what)

    runs = {}
    for name, extra in (("default", []), ("fraction 0.5", ["--gpu-memory-fraction", "0.5"]),
                        ("kv-memory 256", ["--kv-memory", "256"])):
        mib, tokens, tail, probed = serve_once(binary, model, extra, probe=name == "default")
        runs[name] = mib
        check(mib is not None and tokens == 8,
              f"serve --device cuda, {name}: KV pool {mib} MiB, {tokens} of 8 tokens came back"
              + ("" if mib is not None and tokens == 8 else f"; log: {tail}"))
        if name == "default":
            one, four, pen, host = probed or (None, None, None, None)
            check(one is not None and four == one * 4 and pen == 16 and host == 0,
                  f"serve --device cuda: logit_bias +100 on token 42 gives {four!r} for 4 tokens "
                  f"({one!r} alone, need 4 copies); a penalised request {pen} of 16 tokens; "
                  f"steps sampled on the host {host} (need 0)")
    d, h, k = runs["default"], runs["fraction 0.5"], runs["kv-memory 256"]
    if None not in (d, h, k):
        check(d > 4096, f"the default pool ({d} MiB) is a share of the GPU, not the engine's "
                        "1 GiB")
        check(h < d, f"--gpu-memory-fraction 0.5 ({h} MiB) is smaller than the default 0.9 "
                     f"({d} MiB)")
        check(k <= 256, f"--kv-memory 256 gives at most 256 MiB ({k} MiB)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
