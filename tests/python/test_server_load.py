"""`swiftinfer serve` under load and under hostile input (issue 5, "Proof"):

- 64 concurrent streaming clients, a third of which hang up after a few chunks: every other
  stream is well formed and ends in `data: [DONE]`, and afterwards /metrics shows no running or
  waiting request and no KV block held by a request (cached prefix blocks may stay);
- a bounded, seeded fuzz of request bodies (random bytes, broken JSON, huge numbers, wrong types,
  invalid UTF-8, deep nesting): every one gets a 2xx or 4xx answer and the server stays healthy."""
import http.client
import json
import random
import threading
import time

import pytest

from server_fixture import metric, parse_prometheus, raw_request, running_server

N_CLIENTS = 64
HANG_UP_MAX_TOKENS = 400
FUZZ_REQUESTS = 500
FUZZ_SECONDS = 240
# Metric names the server exports (see test_server_openai.METRIC_FAMILIES).
RUNNING = "swiftinfer_num_requests_running"
WAITING = "swiftinfer_num_requests_waiting"
IN_FLIGHT = "swiftinfer_http_requests_in_flight"


def kv_blocks(samples, state):
    return metric(samples, "swiftinfer_kv_blocks", state=state)


@pytest.fixture(scope="module")
def server(binary, default_model):
    # a small context bounds the worst fuzzed request (one that drops max_tokens)
    with running_server("--served-model-name", "smol", "-c", 512, model=default_model) as srv:
        yield srv


def metrics(server):
    status, _, body = raw_request(server.base_url, "GET", "/metrics")
    assert status == 200
    return parse_prometheus(body.decode())[1]


def stream_request(server, body, hang_up_after=None, timeout=300):
    """POSTs a streaming request and reads its SSE events. Returns the list of parsed chunks
    (the string "[DONE]" for the terminator). hang_up_after: close the connection after that
    many chunks, as a client that goes away."""
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", body.pop("_path"), body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200, (r.status, r.read()[:300])
        assert r.getheader("Content-Type", "").startswith("text/event-stream")
        events, pending = [], []
        while True:
            line = r.readline()
            if not line:
                break
            line = line.decode().rstrip("\r\n")
            if line:
                pending.append(line)
                continue
            if not pending:
                continue  # blank line between events
            assert len(pending) == 1 and pending[0].startswith("data: "), pending
            data = pending[0][len("data: "):]
            pending = []
            events.append("[DONE]" if data == "[DONE]" else json.loads(data))
            if hang_up_after is not None and len(events) >= hang_up_after:
                return events
            if events[-1] == "[DONE]":
                break
        assert not pending, f"unterminated event {pending}"
        return events
    finally:
        conn.close()


def check_complete_stream(events, max_tokens, n=1):
    assert events and events[-1] == "[DONE]", f"no [DONE] at the end: {events[-3:]}"
    chunks = events[:-1]
    assert "[DONE]" not in chunks
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1, ids
    reasons, text = {}, {}
    for c in chunks:
        for ch in c["choices"]:
            piece = ch.get("delta", {}).get("content") if "delta" in ch else ch.get("text")
            text[ch["index"]] = text.get(ch["index"], "") + (piece or "")
            if ch.get("finish_reason"):
                assert ch["index"] not in reasons
                reasons[ch["index"]] = ch["finish_reason"]
    assert sorted(reasons) == list(range(n)), reasons
    assert set(reasons.values()) <= {"stop", "length"}, reasons
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert usage and 0 < usage[-1]["completion_tokens"] <= max_tokens * n, usage
    return text


def wait_drained(server, timeout=30):
    """Polls /metrics until nothing runs or waits; returns the last samples."""
    deadline = time.monotonic() + timeout
    while True:
        s = metrics(server)
        if metric(s, RUNNING) == 0 and metric(s, WAITING) == 0 and metric(s, IN_FLIGHT) == 0 \
                and kv_blocks(s, "used") == 0:
            return s
        if time.monotonic() > deadline:
            return s
        time.sleep(0.2)


def test_64_concurrent_streams_with_hangups(server):
    before = metrics(server)
    assert metric(before, RUNNING) == 0 and metric(before, WAITING) == 0
    results, errors = [None] * N_CLIENTS, []
    shared = "You are a helpful assistant. Answer in one short sentence. " * 4

    def client(i):
        try:
            hang_up = i % 3 == 0
            chat = i % 2 == 0
            body = {"model": "smol", "stream": True, "temperature": 0.8, "seed": i,
                    "stream_options": {"include_usage": True}, "ignore_eos": True,
                    # a client that hangs up asks for much more than it reads: were its request
                    # not cancelled it would still be running when the others have finished
                    "max_tokens": HANG_UP_MAX_TOKENS if hang_up else 24}
            if chat:
                body["_path"] = "/v1/chat/completions"
                body["messages"] = [{"role": "system", "content": shared},
                                    {"role": "user", "content": f"Question {i}: name a fruit."}]
            else:
                body["_path"] = "/v1/completions"
                body["prompt"] = f"{shared} Item {i}:"
            events = stream_request(server, body, hang_up_after=3 if hang_up else None)
            results[i] = ("hung up", events) if hang_up else \
                ("done", check_complete_stream(events, 24))
        except Exception as e:  # noqa: BLE001 -- reported below with the client's number
            errors.append(f"client {i}: {e!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(N_CLIENTS)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    elapsed = time.monotonic() - t0
    assert not errors, "\n".join(errors[:10])
    done = [r for r in results if r and r[0] == "done"]
    assert len(done) == N_CLIENTS - len(range(0, N_CLIENTS, 3)), results
    assert all(r[1][0] for r in done), "a finished stream with no text"

    after = wait_drained(server, timeout=15)
    assert metric(after, RUNNING) == 0, "requests still running: a hung-up client leaked"
    assert metric(after, WAITING) == 0
    assert metric(after, IN_FLIGHT) == 0
    assert kv_blocks(after, "used") == 0, \
        f"{kv_blocks(after, 'used')} KV blocks still held ({kv_blocks(after, 'cached')} cached)"
    # free counts every block with no reference (cached prefix blocks included): all of them
    assert kv_blocks(after, "free") == kv_blocks(after, "total")
    assert 0 < kv_blocks(after, "cached") <= kv_blocks(after, "free")
    # the hung-up requests were stopped early: far fewer tokens than the 400 each asked for
    hung_up = len(range(0, N_CLIENTS, 3))
    generated = metric(after, "swiftinfer_generation_tokens_total") - \
        metric(before, "swiftinfer_generation_tokens_total")
    assert generated < (N_CLIENTS - hung_up) * 24 + hung_up * HANG_UP_MAX_TOKENS / 2, \
        f"{generated} tokens generated in {elapsed:.1f}s: hung-up requests ran on"
    assert server.alive()


# --- fuzz ------------------------------------------------------------------------------------

FIELDS = ["model", "messages", "prompt", "max_tokens", "max_completion_tokens", "temperature",
          "top_p", "top_k", "min_p", "n", "stop", "seed", "presence_penalty",
          "frequency_penalty", "repetition_penalty", "logprobs", "top_logprobs", "stream",
          "stream_options", "ignore_eos", "streaming", "user"]
HOSTILE_VALUES = [None, True, False, 0, -1, 1, 2**31, -2**31, 2**63, 2**64, 10**30, -10**30,
                  1e308, -1e308, 5e-324, 0.5, -0.5, "", "x", "\u0000", "\ud7ff\ue000",
                  [], [None], [1, 2, 3], {}, {"a": 1}, ["a"] * 50, "9" * 400,
                  {"sink": -1, "window": 10**12}, {"sink": "a"}, {"include_usage": "yes"},
                  [{"role": "user"}], [{"role": 5, "content": "x"}],
                  [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                  [{"role": "user", "content": None}], [[[[]]]]]
RAW_HUGE = [b"1" * 5000, b"1e999999", b"-1e999999", b"123456789012345678901234567890",
            b"0.000000000000000000000000000001e-400", b"NaN", b"Infinity", b"-0", b"1.5e+308"]
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
                b"\xc0\xaf", b"\x80\x80\x80"]


def valid_body(rng, path):
    if path.endswith("chat/completions"):
        return {"model": "smol", "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": rng.choice([1, 2, 3])}
    return {"model": "smol", "prompt": "Hi", "max_tokens": rng.choice([1, 2, 3])}


def fuzz_body(rng, path):
    kind = rng.randrange(8)
    base = valid_body(rng, path)
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
    if kind == 1:  # valid JSON, one field set to a hostile value
        field = rng.choice(FIELDS)
        if field in ("max_tokens", "max_completion_tokens", "n") and \
                rng.random() < 0.5:
            base[field] = rng.choice([-1, 0, 2**31, 10**30, 1e308, "3", None, [], 10**6])
        else:
            base[field] = rng.choice(HOSTILE_VALUES)
        return json.dumps(base).encode()
    if kind == 2:  # a raw huge or non-JSON number spliced in
        field = rng.choice(FIELDS)
        return json.dumps(base).encode()[:-1] + b', "' + field.encode() + b'": ' + \
            rng.choice(RAW_HUGE) + b"}"
    if kind == 3:  # invalid UTF-8 inside a string, or as a key
        raw = json.dumps(base).encode()
        where = raw.find(b'"Hi"') + 2
        bad = rng.choice(INVALID_UTF8)
        if rng.random() < 0.5:
            return raw[:where] + bad + raw[where:]
        return raw[:-1] + b', "' + bad + b'": 1}'
    if kind == 4:  # deep nesting, as the whole body or as a field
        depth = rng.choice([10, 100, 1000, 10000, 100000])
        nest = b"[" * depth + b"]" * depth
        if rng.random() < 0.5:
            return nest
        return json.dumps(base).encode()[:-1] + b', "' + rng.choice(FIELDS).encode() + \
            b'": ' + nest + b"}"
    if kind == 5:  # truncated JSON
        raw = json.dumps(base).encode()
        return raw[:rng.randrange(len(raw))]
    if kind == 6:  # byte flips in valid JSON
        raw = bytearray(json.dumps(base).encode())
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    # kind 7: the JSON is fine but of the wrong shape, or a field is repeated
    return rng.choice([b"null", b"1", b'"str"', b"[]", b"true", b"{}",
                       b'{"model": "smol", "model": 1, "prompt": "a", "max_tokens": 1}',
                       b'{"messages": [], "model": "smol"}', b'{"prompt": [], "model": "smol"}',
                       b'{"prompt": [[1, 2], [-5]], "model": "smol", "max_tokens": 1}',
                       b'{"prompt": [99999999], "model": "smol", "max_tokens": 1}'])


def test_fuzzed_bodies_get_4xx_or_2xx(server):
    rng = random.Random(20261130)
    deadline = time.monotonic() + FUZZ_SECONDS
    seen, bad = {}, []
    n = 0
    for n in range(1, FUZZ_REQUESTS + 1):
        path = rng.choice(["/v1/chat/completions", "/v1/completions"])
        body = fuzz_body(rng, path)
        try:
            status, headers, resp = raw_request(server.base_url, "POST", path, body,
                                                headers={"Content-Type": "application/json"},
                                                timeout=60)
        except Exception as e:  # noqa: BLE001
            bad.append((n, body[:200], repr(e)))
            if not server.alive():
                break
            continue
        seen[status] = seen.get(status, 0) + 1
        if not (200 <= status < 300 or 400 <= status < 500):
            bad.append((n, body[:200], status, resp[:200]))
        elif status >= 400:
            err = json.loads(resp).get("error")
            if not (isinstance(err, dict) and isinstance(err.get("message"), str)):
                bad.append((n, body[:200], status, "not an OpenAI error", resp[:200]))
        if time.monotonic() > deadline:
            break
    assert server.alive(), f"server died after request {n}: {bad[-1:]}\n{server.log_text()[-3000:]}"
    assert not bad, f"{len(bad)} bad answers of {n}, first: {bad[:5]}"
    assert n >= 200, f"only {n} requests in {FUZZ_SECONDS}s"
    assert raw_request(server.base_url, "GET", "/health")[0] == 200
    status, _, resp = raw_request(server.base_url, "POST", "/v1/completions",
                                  {"model": "smol", "prompt": "Hello", "max_tokens": 2})
    assert status == 200, resp
    s = wait_drained(server)
    assert metric(s, RUNNING) == 0 and kv_blocks(s, "used") == 0
    print(f"fuzz: {n} requests, statuses {dict(sorted(seen.items()))}")
