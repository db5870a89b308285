"""`swiftinfer serve` end to end, through the official `openai` client as users run it, and raw
HTTP for what that client would never send (issue 5: endpoints, request fields, errors).

One server per module (model load is the slow part); servers with other flags (an API key, a
tiny queue) are started by the tests that need them."""
import json
import re
import threading
import time

import pytest

from conftest import run_cli
from server_fixture import (check_histograms, check_openai_error, metric, parse_prometheus,
                            raw_request, running_server)

openai = pytest.importorskip("openai")

MODEL_NAME = "smol-test"
CTX = 1024
HELLO = [{"role": "user", "content": "Name three colours."}]
# ~200 tokens: longer than several 16-token KV blocks, so a repeat is served from the prefix cache.
LONG_PROMPT = " ".join(f"item {i} is a {['red', 'green', 'blue'][i % 3]} box;" for i in range(20))


@pytest.fixture(scope="module")
def server(binary, default_model):
    with running_server("--served-model-name", MODEL_NAME, "-c", CTX,
                        model=default_model) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0,
                         timeout=120)


def chat(client, **kw):
    kw.setdefault("model", MODEL_NAME)
    kw.setdefault("messages", HELLO)
    kw.setdefault("max_tokens", 8)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(**kw)


def complete(client, **kw):
    kw.setdefault("model", MODEL_NAME)
    kw.setdefault("prompt", "The capital of France is")
    kw.setdefault("max_tokens", 8)
    kw.setdefault("temperature", 0)
    return client.completions.create(**kw)


def collect_chat_stream(stream):
    """Returns ({index: text}, {index: finish_reason}, chunks)."""
    texts, reasons, chunks = {}, {}, []
    for ch in stream:
        chunks.append(ch)
        assert ch.object == "chat.completion.chunk"
        for c in ch.choices:
            texts.setdefault(c.index, "")
            if c.delta.content:
                texts[c.index] += c.delta.content
            if c.finish_reason:
                assert c.index not in reasons, "two finish_reasons for one choice"
                reasons[c.index] = c.finish_reason
    return texts, reasons, chunks


# --- basics ----------------------------------------------------------------------------------

def test_health_and_models(server, client):
    status, _, body = raw_request(server.base_url, "GET", "/health")
    assert status == 200, body
    models = client.models.list()
    ids = [m.id for m in models.data]
    assert ids == [MODEL_NAME]
    status, _, body = raw_request(server.base_url, "GET", "/v1/models")
    doc = json.loads(body)
    assert doc["object"] == "list" and doc["data"][0]["object"] == "model"


def test_chat_non_streaming(client):
    r = chat(client, max_tokens=8)
    assert r.object == "chat.completion"
    assert r.id and isinstance(r.created, int) and r.created > 1_600_000_000
    assert r.model == MODEL_NAME
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant"
    assert isinstance(c.message.content, str) and c.message.content
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 5 and 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_chat_streaming_matches_non_streaming(client):
    whole = chat(client, max_tokens=12)
    stream = chat(client, max_tokens=12, stream=True, stream_options={"include_usage": True})
    texts, reasons, chunks = collect_chat_stream(stream)
    assert texts == {0: whole.choices[0].message.content}
    assert reasons == {0: whole.choices[0].finish_reason}
    assert len({ch.id for ch in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert sum(1 for ch in chunks if ch.choices and ch.choices[0].delta.content) > 1, \
        "the answer came in one piece: not streamed"
    last = chunks[-1]  # include_usage: a final chunk with empty choices and the usage
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens


def test_raw_sse_framing(server):
    status, headers, body = raw_request(server.base_url, "POST", "/v1/chat/completions", {
        "model": MODEL_NAME, "messages": HELLO, "max_tokens": 4, "stream": True})
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    events = [e for e in body.decode().split("\n\n") if e.strip()]
    assert events[-1].strip() == "data: [DONE]"
    for e in events[:-1]:
        assert e.startswith("data: "), e
        json.loads(e[len("data: "):])


def test_completions(client):
    r = complete(client, max_tokens=6)
    assert r.object == "text_completion" and r.model == MODEL_NAME
    assert len(r.choices) == 1 and r.choices[0].text
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 6
    text = "".join(ch.choices[0].text for ch in complete(client, max_tokens=6, stream=True)
                   if ch.choices)
    assert text == r.choices[0].text


def test_completions_prompt_forms(client):
    r = complete(client, prompt=["One, two,", "Red, green,"], max_tokens=4)
    assert sorted(c.index for c in r.choices) == [0, 1]
    alone = complete(client, prompt="Red, green,", max_tokens=4)
    assert [c.text for c in r.choices if c.index == 1] == [alone.choices[0].text]
    # token ids: re-encode nothing, just check the server takes them and counts them
    r = complete(client, prompt=[504, 3458, 282, 4649, 314], max_tokens=4)
    assert r.usage.prompt_tokens == 5 and r.choices[0].text


def test_n_greater_than_one(client):
    r = chat(client, n=3, temperature=0.9, seed=7, max_tokens=10)
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert all(c.message.content for c in r.choices)
    assert 3 <= r.usage.completion_tokens <= 30  # summed over the choices
    assert len({c.message.content for c in r.choices}) > 1, "n samples all alike"
    texts, reasons, _ = collect_chat_stream(
        chat(client, n=2, temperature=0.9, seed=7, max_tokens=10, stream=True))
    assert sorted(texts) == [0, 1] and sorted(reasons) == [0, 1]
    r = complete(client, n=2, temperature=0.9, seed=7, max_tokens=6)
    assert sorted(c.index for c in r.choices) == [0, 1]


def test_stop_strings(client):
    extra = {"ignore_eos": True}
    base = chat(client, max_tokens=24, extra_body=extra).choices[0].message.content
    assert len(base) > 12, base
    stop = base[8:11]
    want = base[:base.find(stop)]
    r = chat(client, max_tokens=24, stop=[stop, "@@never@@"], extra_body=extra)
    assert r.choices[0].message.content == want
    assert stop not in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    texts, reasons, _ = collect_chat_stream(
        chat(client, max_tokens=24, stop=stop, extra_body=extra, stream=True))
    assert texts == {0: want} and reasons == {0: "stop"}
    rc = complete(client, prompt="1, 2, 3, 4, 5,", max_tokens=20, stop=" 8",
                  extra_body=extra)
    assert " 8" not in rc.choices[0].text and rc.choices[0].finish_reason == "stop", rc


def test_chat_logprobs(client):
    r = chat(client, max_tokens=6, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert isinstance(t.token, str) and t.logprob <= 0
        assert len(t.top_logprobs) == 3
        lps = [x.logprob for x in t.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        # greedy: the sampled token is the most likely one
        assert t.logprob == pytest.approx(lps[0], abs=1e-4)
    r = chat(client, max_tokens=4)
    assert r.choices[0].logprobs is None


def test_completion_logprobs(client):
    r = complete(client, max_tokens=5, logprobs=2)
    lp = r.choices[0].logprobs
    n = r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == n
    assert "".join(lp.tokens) == r.choices[0].text
    assert all(v <= 0 for v in lp.token_logprobs)
    assert all(1 <= len(d) <= 2 for d in lp.top_logprobs)
    if lp.text_offset is not None:
        assert lp.text_offset == sorted(lp.text_offset)


def test_cached_tokens_on_repeated_prompt(client):
    msgs = [{"role": "user", "content": LONG_PROMPT}]
    first = chat(client, messages=msgs, max_tokens=2)
    again = chat(client, messages=msgs, max_tokens=2)
    assert first.usage.prompt_tokens > 64
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert 0 < cached <= again.usage.prompt_tokens
    assert again.choices[0].message.content == first.choices[0].message.content


def test_seed_reproducibility(client):
    kw = dict(temperature=0.8, max_tokens=24, extra_body={"ignore_eos": True})
    a = chat(client, seed=1234, **kw).choices[0].message.content
    b = chat(client, seed=1234, **kw).choices[0].message.content
    assert a == b
    others = {chat(client, seed=s, **kw).choices[0].message.content for s in (1, 2, 3)}
    assert len(others | {a}) > 1, "four seeds gave one text: the seed is ignored"


def test_max_tokens_gives_length(client):
    r = chat(client, max_tokens=5, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    r = chat(client, max_tokens=None, max_completion_tokens=3,
             extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    r = complete(client, max_tokens=4, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 4


def test_sampling_and_extension_fields_accepted(client):
    r = chat(client, temperature=0.7, top_p=0.9, seed=3, presence_penalty=0.5,
             frequency_penalty=0.5, max_tokens=6,
             extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1,
                         "ignore_eos": True, "streaming": {"sink": 4, "window": 64}})
    assert r.usage.completion_tokens == 6


def test_logit_bias(client, server, default_model):
    """OpenAI's logit_bias through the official client: -100 on the greedy pick bans it (another
    first token), while the logprobs stay the model's (the banned token still the most likely
    there); +100 on a token makes greedy decoding repeat it; malformed maps are 400s."""
    prompt = "The capital of France is"
    base = complete(client, prompt=prompt, max_tokens=1)
    text = base.choices[0].text

    def ids(t):
        out = run_cli("tokenize", "-m", default_model, "-p", t).stdout.decode()
        return [int(x) for x in out.split()]
    pre, full = ids(prompt), ids(prompt + text)
    assert full[:len(pre)] == pre and len(full) == len(pre) + 1, (pre, full)
    tok = full[-1]
    banned = complete(client, prompt=prompt, max_tokens=1, logprobs=1,
                      logit_bias={str(tok): -100})
    assert banned.choices[0].text != text
    assert list(banned.choices[0].logprobs.top_logprobs[0]) == [text]
    forced = complete(client, prompt=prompt, max_tokens=3, logit_bias={str(tok): 100},
                      extra_body={"ignore_eos": True})
    assert forced.choices[0].text == text * 3
    for bad in ({"x": 1}, {"-3": 1}, {"5": 101}, {"5": "high"}, [1, 2], {"99999999": 1}):
        check_openai_error(post(server, "/v1/completions", {
            "model": MODEL_NAME, "prompt": "Hi", "max_tokens": 2, "logit_bias": bad}), 400,
            "logit_bias")


def test_unknown_fields_ignored(client, server):
    r = chat(client, max_tokens=3, user="someone",
             extra_body={"no_such_field": [1, {"x": None}], "another": "y"})
    assert r.choices[0].message.content
    status, _, body = raw_request(server.base_url, "POST", "/v1/completions", {
        "model": MODEL_NAME, "prompt": "Hi", "max_tokens": 2, "frobnicate": True})
    assert status == 200, body


# --- errors ----------------------------------------------------------------------------------

def post(server, path, body, **kw):
    return raw_request(server.base_url, "POST", path, body, **kw)


def test_invalid_json(server):
    for body in (b"{", b"not json", b"", b"[1, 2]", b'{"model": "x",}'):
        check_openai_error(post(server, "/v1/chat/completions", body), 400)


@pytest.mark.parametrize("field,value", [
    ("messages", "hello"), ("messages", [{"role": "user"}]), ("temperature", "hot"),
    ("max_tokens", "ten"), ("max_tokens", -1), ("n", 0), ("top_p", [1]), ("stop", 5),
    ("seed", "abc"), ("top_logprobs", 99), ("stream", "yes")])
def test_wrong_types_name_the_field(server, field, value):
    body = {"model": MODEL_NAME, "messages": HELLO, "max_tokens": 2, field: value}
    check_openai_error(post(server, "/v1/chat/completions", body), 400, field)


def test_missing_fields(server):
    check_openai_error(post(server, "/v1/chat/completions", {"model": MODEL_NAME}), 400,
                       "messages")
    check_openai_error(post(server, "/v1/completions", {"model": MODEL_NAME}), 400, "prompt")


def test_unknown_model_and_path(server, client):
    with pytest.raises(openai.NotFoundError):
        chat(client, model="no-such-model")
    err = check_openai_error(post(server, "/v1/chat/completions",
                                  {"model": "no-such-model", "messages": HELLO}), 404)
    assert err["param"] == "model" or "no-such-model" in err["message"], err
    check_openai_error(raw_request(server.base_url, "GET", "/v1/nothing-here"), 404)
    check_openai_error(post(server, "/v2/chat/completions", {"x": 1}), 404)


def send_big_body(server, size, chunked):
    """POSTs a JSON body of about `size` bytes in pieces; a server may answer 413 and close
    before it has read everything, so a failed send is not an error as long as the answer can
    be read. chunked: no Content-Length, so the limit must be enforced while reading."""
    import http.client
    host, port = server.base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    head = b'{"model": "' + MODEL_NAME.encode() + b'", "prompt": "'
    piece = b"a" * (1 << 16)
    try:
        conn.putrequest("POST", "/v1/completions")
        conn.putheader("Content-Type", "application/json")
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(len(head) + size + 2))
        conn.endheaders()
        try:
            for part in [head] + [piece] * (size // len(piece)) + [b'"}']:
                conn.send(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


@pytest.mark.parametrize("chunked", [False, True])
def test_body_too_large(server, chunked):
    check_openai_error(send_big_body(server, 16 << 20, chunked), 413)
    assert server.alive()
    assert raw_request(server.base_url, "GET", "/health")[0] == 200


def test_context_length_exceeded(server, client):
    prompt = "word " * 600
    with pytest.raises(openai.BadRequestError) as e:
        complete(client, prompt=prompt, max_tokens=800)
    msg = str(e.value)
    assert str(CTX) in msg and "800" in msg, msg
    err = check_openai_error(post(server, "/v1/completions", {
        "model": MODEL_NAME, "prompt": prompt, "max_tokens": 800}), 400, str(CTX))
    assert err["code"] == "context_length_exceeded", err
    nums = {int(x) for x in re.findall(r"\d+", err["message"])}
    assert CTX in nums and len(nums) >= 2, err


def test_api_key(binary, default_model):
    with running_server("--api-key", "sekrit-123", model=default_model) as srv:
        body = {"model": srv_model(srv), "messages": HELLO, "max_tokens": 2}
        check_openai_error(post(srv, "/v1/chat/completions", body), 401)
        check_openai_error(post(srv, "/v1/chat/completions", body,
                                headers={"Authorization": "Bearer wrong"}), 401)
        check_openai_error(raw_request(srv.base_url, "GET", "/v1/models"), 401)
        for wrong in ("wrong", "sekrit-12", "sekrit-1234"):
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=srv.base_url + "/v1", api_key=wrong,
                              max_retries=0).models.list()
        good = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="sekrit-123", max_retries=0)
        r = good.chat.completions.create(model=srv_model(srv), messages=HELLO, max_tokens=2)
        assert r.choices[0].message.content is not None
        status, _, _ = post(srv, "/v1/chat/completions", body,
                            headers={"Authorization": "Bearer sekrit-123"})
        assert status == 200


def srv_model(srv):
    status, _, body = raw_request(srv.base_url, "GET", "/v1/models",
                                  headers={"Authorization": "Bearer sekrit-123"})
    return json.loads(body)["data"][0]["id"]


def test_queue_full(binary, default_model):
    """--max-queue 1 with one sequence at a time: of 8 simultaneous requests some must be
    refused with 429 or 503 (OpenAI-shaped), the others served."""
    with running_server("--max-queue", 1, "--max-num-seqs", 1, model=default_model) as srv:
        results = []

        def one():
            body = {"model": srv_model_noauth(srv), "prompt": "Count: 1, 2, 3,",
                    "max_tokens": 48, "ignore_eos": True}
            results.append(post(srv, "/v1/completions", body, timeout=120))

        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses = sorted(s for s, _, _ in results)
        assert 200 in statuses, statuses
        refused = [r for r in results if r[0] in (429, 503)]
        assert refused, statuses
        assert set(statuses) <= {200, 429, 503}, statuses
        for r in refused:
            check_openai_error(r, r[0])
        status, _, _ = raw_request(srv.base_url, "GET", "/health")
        assert status == 200


def srv_model_noauth(srv):
    return json.loads(raw_request(srv.base_url, "GET", "/v1/models")[2])["data"][0]["id"]


# --- metrics (last: it checks counters the tests above moved) --------------------------------

METRIC_FAMILIES = {
    # name: type. The issue asks for requests by status, token counters, TTFT / inter-token /
    # end-to-end latency histograms, running/waiting gauges, KV usage and prefix-cache hits.
    "swiftinfer_requests_total": "counter",
    "swiftinfer_prompt_tokens_total": "counter",
    "swiftinfer_generation_tokens_total": "counter",
    "swiftinfer_time_to_first_token_seconds": "histogram",
    "swiftinfer_inter_token_latency_seconds": "histogram",
    "swiftinfer_e2e_request_latency_seconds": "histogram",
    "swiftinfer_num_requests_running": "gauge",
    "swiftinfer_num_requests_waiting": "gauge",
    "swiftinfer_http_requests_in_flight": "gauge",
    "swiftinfer_kv_cache_usage_ratio": "gauge",
    "swiftinfer_kv_blocks": "gauge",
    "swiftinfer_prefix_cache_hit_rate": "gauge",
}


def get_metrics(server):
    status, headers, body = raw_request(server.base_url, "GET", "/metrics")
    assert status == 200
    assert headers["content-type"].startswith("text/plain"), headers
    return parse_prometheus(body.decode())


def settled_metrics(server, timeout=10.0):
    """/metrics once the server has finished accounting: the server counts a request when
    libmicrohttpd reports it complete, which can come after the client has read the response.
    Waits until two snapshots 200 ms apart agree and no generation is in flight."""
    deadline = time.monotonic() + timeout
    prev = get_metrics(server)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        cur = get_metrics(server)
        if cur == prev and metric(cur[1], "swiftinfer_http_requests_in_flight") == 0:
            return cur
        prev = cur
    raise AssertionError("/metrics did not settle within %.0f s" % timeout)


def test_metrics(server, client):
    _, before = settled_metrics(server)
    msgs = [{"role": "user", "content": LONG_PROMPT}]
    r1 = chat(client, messages=msgs, max_tokens=3, extra_body={"ignore_eos": True})
    r2 = chat(client, messages=msgs, max_tokens=3, extra_body={"ignore_eos": True})
    check_openai_error(post(server, "/v1/chat/completions", b"{"), 400)
    types, samples = settled_metrics(server)
    missing = {n for n in METRIC_FAMILIES if n not in types}
    assert not missing, f"missing metric families {missing}; have {sorted(types)}"
    for n, t in METRIC_FAMILIES.items():
        assert types[n] == t, (n, types[n])
    check_histograms(types, samples)

    def delta(name, **labels):
        return metric(samples, name, **labels) - (metric(before, name, **labels) or 0)

    assert delta("swiftinfer_requests_total", status="200") == 2
    assert delta("swiftinfer_requests_total", status="400") == 1
    assert delta("swiftinfer_generation_tokens_total") == 6
    assert delta("swiftinfer_prompt_tokens_total") == \
        r1.usage.prompt_tokens + r2.usage.prompt_tokens
    assert delta("swiftinfer_time_to_first_token_seconds_count") == 2
    assert delta("swiftinfer_e2e_request_latency_seconds_count") == 2
    assert delta("swiftinfer_inter_token_latency_seconds_count") == 4  # 2 gaps per request
    assert delta("swiftinfer_prefix_cache_hits_total") > 0  # the repeated prompt
    assert metric(samples, "swiftinfer_num_requests_running") == 0
    assert metric(samples, "swiftinfer_num_requests_waiting") == 0
    assert metric(samples, "swiftinfer_http_requests_in_flight") == 0
    assert metric(samples, "swiftinfer_kv_blocks", state="used") == 0
    assert metric(samples, "swiftinfer_kv_blocks", state="total") > 0
    assert metric(samples, "swiftinfer_kv_blocks", state="cached") > 0
    assert 0 < metric(samples, "swiftinfer_prefix_cache_hit_rate") <= 1


def test_parse_prometheus_rejects_garbage():
    """The parser above must be able to fail."""
    with pytest.raises(ValueError):
        parse_prometheus("this is not a metric line at all\n")
    with pytest.raises(ValueError):
        parse_prometheus('m{a="1" 3\n')
    types, samples = parse_prometheus('# TYPE m counter\nm{a="x\\"y",b="2"} 3\nn +Inf\n')
    assert types == {"m": "counter"} and samples[0] == ("m", {"a": 'x\\"y', "b": "2"}, 3.0)


# --- lifecycle and the streaming extension (servers of their own) ----------------------------

def test_streaming_extension_outlives_the_context(binary, default_model):
    """streaming: {sink, window} (StreamingLLM) generates past a 128-token context in constant
    memory; without it the same request is refused as too long."""
    n = 200
    with running_server("-c", 128, model=default_model) as srv:
        c = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0,
                          timeout=300)
        model = srv_model_noauth(srv)
        kw = dict(model=model, prompt="Once upon a time", max_tokens=n, temperature=0.8,
                  seed=1)
        with pytest.raises(openai.BadRequestError):
            c.completions.create(**kw)
        r = c.completions.create(**kw, extra_body={"ignore_eos": True,
                                                   "streaming": {"sink": 16, "window": 48}})
        assert r.usage.completion_tokens == n and r.choices[0].finish_reason == "length"
        assert len(r.choices[0].text) > n


def test_sigterm_with_a_stream_in_flight(binary, default_model):
    """SIGTERM while a long stream runs: the server stops accepting, ends the stream (finished
    or cancelled after --shutdown-timeout) and exits 0."""
    import signal
    import time

    from server_fixture import Server
    srv = Server("--shutdown-timeout", 2, model=default_model).start()
    try:
        c = openai.OpenAI(base_url=srv.base_url + "/v1", api_key="x", max_retries=0,
                          timeout=120)
        stream = c.completions.create(model=srv_model_noauth(srv), prompt="Count: 1, 2,",
                                      max_tokens=3000, stream=True,
                                      extra_body={"ignore_eos": True})
        it = iter(stream)
        for _ in range(3):
            next(it)
        srv.proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rest = 0
        try:
            for _ in it:
                rest += 1
        except Exception:  # noqa: BLE001 -- a cut stream is allowed; a hang is not
            pass
        assert time.monotonic() - t0 < 15, "the stream outlived the shutdown timeout"
        assert rest < 2900, "the stream was not stopped"
        rc = srv.proc.wait(timeout=15)
        assert rc == 0, srv.log_text()[-3000:]
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
