#!/usr/bin/env python3
"""Time to first token of a repeated long prompt: the second request reuses the first's KV
blocks from the prefix cache and computes only the unshared tail.

Usage: bench/prefix_ttft.py [--binary build/swiftinfer] [--model M] [--port 18777]
Starts `swiftinfer serve`, sends a ~1200-token prompt (a Debian licence text) three times (the
third with a different ending), prints TTFT and cached tokens per request, stops the server."""
import argparse
import json
import subprocess
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--binary", default="build/swiftinfer")
ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
ap.add_argument("--port", type=int, default=18777)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()

server = subprocess.Popen([args.binary, "serve", "-m", args.model, "--port", str(args.port),
                           "-t", str(args.threads), "-c", "4096"], stderr=subprocess.DEVNULL)
url = f"http://127.0.0.1:{args.port}"
try:
    for _ in range(100):
        try:
            if urllib.request.urlopen(url + "/health").status == 200:
                break
        except OSError:
            time.sleep(0.1)
    text = open("/usr/share/common-licenses/Apache-2.0").read()[:6000]
    print("| request | prompt tokens | cached tokens | TTFT s |\n| --- | ---: | ---: | ---: |")
    for i, ending in enumerate([" Summary:", " Summary:", " Short summary:"]):
        body = json.dumps({"prompt": text + ending, "max_tokens": 1, "temperature": 0}).encode()
        t = time.time()
        req = urllib.request.Request(url + "/v1/completions", body,
                                     {"Content-Type": "application/json"})
        usage = json.load(urllib.request.urlopen(req))["usage"]
        print(f"| {i + 1} | {usage['prompt_tokens']} | "
              f"{usage['prompt_tokens_details']['cached_tokens']} | {time.time() - t:.3f} |")
finally:
    server.terminate()
    server.wait(timeout=30)
