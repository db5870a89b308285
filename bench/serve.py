#!/usr/bin/env python3
"""serve.py — a load generator for `swiftinfer serve` (or any OpenAI-compatible server).

Sends streaming chat requests with Poisson arrivals at a given rate (exponential gaps between
arrivals, as in vLLM's benchmark_serving), for a duration or a count, and measures from the
client's side:
  TTFT  time to first token: request sent -> first content chunk;
  TPOT  time per output token after the first: (end - first token) / (output tokens - 1);
  ITL   inter-token latency: the gaps between consecutive content chunks;
  E2E   request sent -> [DONE];
and output tokens/s over the whole run (usage.completion_tokens from the final chunk).

  bench/serve.py --url http://127.0.0.1:8000 --rate 2 --duration 60
  bench/serve.py --launch --rates 0.5,1,2,4 --duration 40 --max-tokens 32 \
      --plot bench/serve_latency.png --markdown /tmp/serve.md

--launch starts build/swiftinfer serve on a free port with the default model (--model-file,
--server-arg to change) and stops it with SIGTERM at the end. A sweep (--rates) prints a markdown
table and, with --plot, a PNG of latency against request rate (needs matplotlib, pinned in
tests/requirements.txt). Standard library otherwise."""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPICS = ["the sea", "a lighthouse", "bread", "winter", "a train journey", "bees", "the moon",
          "a library", "mountains", "a market", "rain", "an old clock", "a garden", "the desert"]
TASKS = ["Write a short poem about {}.", "Describe {} in three sentences.",
         "Give me two facts about {}.", "Tell a tiny story involving {}."]


def percentile(xs, p):
    """Linear-interpolated percentile (numpy's default), None for no data."""
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


class Result:
    __slots__ = ("ok", "error", "start", "first", "end", "chunk_times", "tokens", "prompt_tokens",
                 "conn")

    def __init__(self):
        self.ok, self.error, self.conn = False, None, None
        self.start = self.first = self.end = None
        self.chunk_times, self.tokens, self.prompt_tokens = [], 0, 0


def one_request(host, port, path, body, headers, timeout, res):
    """Streams one (chat) completion, filling res with client-side timestamps."""
    conn = res.conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        res.start = time.perf_counter()
        conn.request("POST", path, body=json.dumps(body), headers=headers)
        r = conn.getresponse()
        if r.status != 200:
            res.error = f"HTTP {r.status}: {r.read()[:200]!r}"
            return
        done = False
        while not done:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = json.loads(data)
            now = time.perf_counter()
            for c in chunk.get("choices") or []:
                if (c.get("delta") or {}).get("content") or c.get("text"):
                    if res.first is None:
                        res.first = now
                    res.chunk_times.append(now)
            if chunk.get("usage"):
                res.tokens = chunk["usage"]["completion_tokens"]
                res.prompt_tokens = chunk["usage"]["prompt_tokens"]
        res.end = time.perf_counter()
        if not done:
            res.error = "stream ended without [DONE]"
        elif res.first is None:
            res.error = "no content"
        else:
            res.ok = True
            if not res.tokens:  # server sent no usage: count content chunks
                res.tokens = len(res.chunk_times)
    except Exception as e:  # noqa: BLE001 -- a failed request is a data point, not a crash
        res.error = repr(e)
    finally:
        conn.close()


def run_rate(args, host, port, model, rate, rng):
    """Sends requests at `rate` per second (Poisson) and returns the metrics dict."""
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    arrivals, t = [], 0.0
    while True:
        t += rng.expovariate(rate) if rate > 0 else 0.0
        if args.num_requests and len(arrivals) >= args.num_requests:
            break
        if not args.num_requests and t >= args.duration:
            break
        arrivals.append(t)
    results, threads = [], []
    t0 = time.perf_counter()
    for i, at in enumerate(arrivals):
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        prompt = rng.choice(TASKS).format(rng.choice(TOPICS)) + f" (request {i})"
        body = {"model": model, "max_tokens": args.max_tokens, "temperature": args.temperature,
                "seed": rng.randrange(1 << 30), "stream": True,
                "stream_options": {"include_usage": True}}
        if args.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if args.ignore_eos:
            body["ignore_eos"] = True
        res = Result()
        results.append(res)
        path = "/v1/chat/completions" if args.endpoint == "chat" else "/v1/completions"
        th = threading.Thread(target=one_request, args=(host, port, path, body, headers,
                                                        args.timeout, res), daemon=True)
        th.start()
        threads.append(th)
    drain_end = time.perf_counter() + args.max_drain
    for th in threads:
        th.join(max(0.0, drain_end - time.perf_counter()))
    stragglers = [r for r, th in zip(results, threads) if th.is_alive()]
    for r in stragglers:  # hang up, so the server cancels them before the next rate
        try:
            r.conn.sock.shutdown(socket.SHUT_RDWR)
        except (AttributeError, OSError):
            pass
    for th in threads:
        th.join(5)
    for r in stragglers:
        r.ok, r.error = False, f"unfinished after the {args.max_drain:g} s drain"
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.ok]
    ttft = [(r.first - r.start) * 1e3 for r in ok]
    tpot = [(r.end - r.first) * 1e3 / (r.tokens - 1) for r in ok if r.tokens > 1]
    itl = [(b - a) * 1e3 for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    e2e = [(r.end - r.start) * 1e3 for r in ok]
    end = max((r.end for r in ok), default=t0)
    out_tokens = sum(r.tokens for r in ok)
    m = {"rate": rate, "sent": len(results), "completed": len(ok),
         "failed": len(results) - len(ok), "wall_s": wall,
         "achieved_rps": len(ok) / wall if wall > 0 else 0,
         "output_tokens": out_tokens,
         "output_tok_s": out_tokens / (end - t0) if end > t0 else 0,
         "errors": sorted({r.error for r in results if r.error})[:5]}
    for name, xs in (("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2e", e2e)):
        for p in (50, 90, 99):
            m[f"{name}_p{p}_ms"] = percentile(xs, p)
    return m


def fmt(v):
    return "-" if v is None else f"{v:.0f}" if v >= 100 else f"{v:.1f}"


def markdown_table(rows):
    head = ("| rate (req/s) | done/sent | out tok/s | TTFT p50 / p90 / p99 (ms) "
            "| TPOT p50 / p90 / p99 (ms) | ITL p50 / p90 / p99 (ms) | E2E p50 / p99 (ms) |\n"
            "|---:|---:|---:|---:|---:|---:|---:|\n")
    body = ""
    for m in rows:
        trip = lambda k: " / ".join(fmt(m[f"{k}_p{p}_ms"]) for p in (50, 90, 99))  # noqa: E731
        body += (f"| {m['rate']:g} | {m['completed']}/{m['sent']} | {m['output_tok_s']:.1f} "
                 f"| {trip('ttft')} | {trip('tpot')} | {trip('itl')} "
                 f"| {fmt(m['e2e_p50_ms'])} / {fmt(m['e2e_p99_ms'])} |\n")
    return head + body


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rates = [m["rate"] for m in rows]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, key, label in ((axes[0], "ttft", "TTFT"), (axes[1], "tpot", "TPOT"),
                           (axes[2], "itl", "ITL")):
        for p, style in ((50, "o-"), (90, "s--"), (99, "^:")):
            ys = [m[f"{key}_p{p}_ms"] for m in rows]
            ax.plot(rates, [float("nan") if y is None else y for y in ys], style,
                    label=f"p{p}")
        ax.set_xscale("log", base=2)  # sweeps usually double the rate
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel(f"{label} (ms)")
        ax.set_title(label)
        ax.grid(alpha=.3)
        ax.legend()
    ax2 = axes[0].twinx()
    ax2.plot(rates, [m["output_tok_s"] for m in rows], "k.-", alpha=.35)
    ax2.set_ylabel("output tok/s (grey)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    port = free_port()
    cmd = [args.binary, "serve", "-m", args.model_file, "--host", "127.0.0.1",
           "--port", str(port), *args.server_arg]
    log = open(args.server_log, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"serve.py: the server exited ({proc.returncode}); see {args.server_log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc, f"http://127.0.0.1:{port}", " ".join(cmd)
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    sys.exit("serve.py: the server did not become healthy in 120 s")


def on_sigterm(_signum, _frame):
    raise KeyboardInterrupt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000", help="server base URL")
    ap.add_argument("--launch", action="store_true", help="start build/swiftinfer serve")
    ap.add_argument("--binary", default=os.path.join(
        os.environ.get("SI_BUILD_DIR", os.path.join(ROOT, "build")), "swiftinfer"))
    ap.add_argument("--model-file",
                    default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--server-arg", action="append", default=[],
                    help="extra argument for the launched server (repeatable)")
    ap.add_argument("--server-log", default="/tmp/swiftinfer-serve-bench.log")
    ap.add_argument("--api-key")
    ap.add_argument("--model", help="model name to send (default: the first of /v1/models)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--rate", type=float, default=1.0, help="requests per second")
    g.add_argument("--rates", help="comma-separated rates to sweep, e.g. 0.5,1,2,4")
    ap.add_argument("--duration", type=float, default=60.0,
                    help="seconds of arrivals per rate (the run waits for stragglers)")
    ap.add_argument("--num-requests", type=int, default=0, help="a count instead of a duration")
    ap.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--ignore-eos", action="store_true", default=True,
                    help="generate exactly max_tokens (default on, so requests are comparable)")
    ap.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false")
    ap.add_argument("--timeout", type=float, default=600.0, help="per-request timeout (s)")
    ap.add_argument("--max-drain", type=float, default=120.0,
                    help="after the last arrival, wait at most this long for stragglers; "
                         "the rest are hung up on and counted as failed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", help="write a PNG of latency against request rate")
    ap.add_argument("--markdown", help="write the markdown table here too")
    ap.add_argument("--json", help="write every rate's metrics as JSON here")
    args = ap.parse_args()

    proc, cmdline = None, None
    # SIGTERM (timeout(1), a CI runner) unwinds like Ctrl-C, so a launched server is stopped
    signal.signal(signal.SIGTERM, on_sigterm)
    if args.launch:
        proc, args.url, cmdline = launch(args)
    try:
        hostport = args.url.removeprefix("http://").rstrip("/")
        host, port = hostport.split(":")
        if not args.model:
            req = urllib.request.Request(args.url + "/v1/models")
            if args.api_key:
                req.add_header("Authorization", "Bearer " + args.api_key)
            with urllib.request.urlopen(req, timeout=10) as r:
                args.model = json.load(r)["data"][0]["id"]
        rates = [float(x) for x in args.rates.split(",")] if args.rates else [args.rate]
        rng = random.Random(args.seed)
        rows = []
        for rate in rates:
            m = run_rate(args, host, int(port), args.model, rate, rng)
            rows.append(m)
            print(f"rate {rate:g}: {m['completed']}/{m['sent']} ok in {m['wall_s']:.1f}s, "
                  f"{m['output_tok_s']:.1f} out tok/s, TTFT p50 {fmt(m['ttft_p50_ms'])} ms, "
                  f"TPOT p50 {fmt(m['tpot_p50_ms'])} ms, ITL p99 {fmt(m['itl_p99_ms'])} ms"
                  + (f", errors {m['errors']}" if m["errors"] else ""), file=sys.stderr)
    finally:
        if proc:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "killed after 60 s"
            print(f"server stopped: exit {rc}", file=sys.stderr)
    table = markdown_table(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"server": cmdline or args.url, "model": args.model, "rows": rows}, f,
                      indent=1)
    if args.plot:
        plot(rows, args.plot, f"{args.model}: streaming {args.endpoint}, "
                              f"{args.max_tokens} output tokens, "
                              f"Poisson arrivals, {args.duration:g} s per rate")
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0 if all(m["failed"] == 0 for m in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
