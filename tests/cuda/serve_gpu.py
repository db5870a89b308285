#!/usr/bin/env python3
"""serve_gpu.py — `swiftinfer serve --device cuda` end to end, for tests/cuda/run.sh.

Starts the server three times on MODEL: with no KV option (on a GPU the pool is then 0.9 of the
free memory less weights and scratch, vLLM's default, far above the engine's 1 GiB), with
--gpu-memory-fraction 0.5 (a smaller pool than the default) and with --kv-memory 256 (that budget,
not a fraction). Each time one completion of 8 tokens must come back over HTTP, and the pool's
size is read from the server's start-up line ("KV pool N blocks (M MiB, ...)").

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


def serve_once(binary, model, extra):
    """(KV MiB from the log or None, completion tokens or None, the log's last lines)"""
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([binary, "serve", "-m", model, "--device", "cuda", "--host",
                             "127.0.0.1", "--port", str(port), *extra],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    tokens = None
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
    return (int(m.group(2)) if m else None), tokens, text.strip().splitlines()[-3:]


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
        mib, tokens, tail = serve_once(binary, model, extra)
        runs[name] = mib
        check(mib is not None and tokens == 8,
              f"serve --device cuda, {name}: KV pool {mib} MiB, {tokens} of 8 tokens came back"
              + ("" if mib is not None and tokens == 8 else f"; log: {tail}"))
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
