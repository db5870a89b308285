"""The engine: continuous batching over a paged KV cache (si_engine_*), one request at a time
or many from several threads."""
import ctypes
from dataclasses import dataclass, field

from ._capi import (EVENT_ERROR, EVENT_NONE, EVENT_TOKEN, FINISH_REASONS, KV_CACHE_DTYPES,
                    EngineStats, Event, Handle, LogitBias, SwiftInferError, check, lib)

_ENGINE_KNOBS = ("max_num_seqs", "max_batched_tokens", "max_wait_ms", "min_batch", "kv_memory",
                 "n_blocks", "gpu_memory_fraction")
_SAMPLING = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty",
             "frequency_penalty", "presence_penalty", "penalty_last_n", "seed")
_POLL_MS = 100  # how long one wait for an event blocks (so that Ctrl-C gets through)


@dataclass
class Token:
    """One sampled token: its id, its text delta (whole UTF-8 characters; text held back while it
    may still become a stop string comes with a later token), and, when asked for, its logprob
    and the top alternatives as (token, logprob) pairs."""
    token: int
    text: str
    logprob: float = None
    top_logprobs: list = None


@dataclass
class Completion:
    """A finished request: the text (stop strings left out), the sampled ids, why it ended
    ("stop", "length", "cancelled"), usage (prompt_tokens, completion_tokens, cached_tokens) and,
    when asked for, each token's Token with logprobs."""
    text: str = ""
    tokens: list = field(default_factory=list)
    finish_reason: str = None
    usage: dict = None
    logprobs: list = None


class Stream:
    """A running request's tokens, in order (Engine.stream). Iterating yields Token objects; once
    it ends, completion holds the whole result. cancel() stops the request at the engine's next
    step and returns the Completion of what it produced (finish_reason "cancelled"); leaving a
    `with` block or closing an unfinished stream cancels it too."""

    def __init__(self, engine, request_id, want_logprobs):
        self._engine, self._id = engine, request_id
        self.completion = Completion(logprobs=[] if want_logprobs else None)
        self._done = False
        self._ev = Event()

    def __iter__(self):
        return self

    def __next__(self):
        while not self._done:
            tok = self._next_event()
            if tok is not None:
                return tok
        raise StopIteration

    def _next_event(self):
        ev = self._ev
        check(lib.si_engine_next_event(self._engine._handle(), self._id, ctypes.byref(ev),
                                       _POLL_MS))
        if ev.type == EVENT_NONE:
            return None
        text = ctypes.string_at(ctypes.addressof(ev) + Event.text.offset, ev.text_len).decode(
            errors="replace")
        c = self.completion
        c.text += text
        if ev.type == EVENT_TOKEN:
            tok = Token(ev.token, text)
            if c.logprobs is not None:
                tok.logprob = ev.logprob
                tok.top_logprobs = [(ev.top[i].token, ev.top[i].logprob) for i in range(ev.n_top)]
                c.logprobs.append(tok)
            c.tokens.append(ev.token)
            return tok
        self._done = True
        c.finish_reason = FINISH_REASONS.get(ev.finish_reason)
        c.usage = {k: getattr(ev.usage, k) for k in ("prompt_tokens", "completion_tokens",
                                                      "cached_tokens")}
        if ev.type == EVENT_ERROR:
            raise SwiftInferError(ev.status, ev.error.decode(errors="replace"))
        return None

    def cancel(self):
        """Stops the request; returns the Completion of everything it produced."""
        if not self._done:
            lib.si_engine_cancel(self._engine._handle(), self._id)  # NOT_FOUND: it just ended
            for _ in self:
                pass
        return self.completion

    close = cancel

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cancel()


class Engine(Handle):
    """An engine on model (which must stay open while the engine lives).

    The knobs are si_engine_params': max_num_seqs (sequences at once, default 64),
    max_batched_tokens (tokens a step, default 512), max_wait_ms and min_batch (dynamic
    batching), kv_memory (bytes of KV cache) or n_blocks (16-token blocks), gpu_memory_fraction
    (CUDA: the KV pool's share of free GPU memory) and kv_cache_dtype ("f16" or "fp8"). Any
    method may be called from any thread; requests from several threads run batched together.
    close() (or the end of a `with` block) stops the engine thread and drops every request."""
    _free = staticmethod(lib.si_engine_free)
    _what = "engine"

    def __init__(self, model, *, kv_cache_dtype="f16", **knobs):
        unknown = set(knobs) - set(_ENGINE_KNOBS)
        if unknown:
            raise TypeError(f"unknown engine parameter(s) {sorted(unknown)}; "
                            f"known: {', '.join(_ENGINE_KNOBS)}, kv_cache_dtype")
        if kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {sorted(KV_CACHE_DTYPES)}")
        p = lib.si_engine_default_params()
        for k, v in knobs.items():
            if v is not None:
                setattr(p, k, v)
        p.kv_cache_dtype = KV_CACHE_DTYPES[kv_cache_dtype]
        self.model = model  # keeps it alive
        self._h = ctypes.c_void_p()
        check(lib.si_engine_create(model._handle(), ctypes.byref(p), ctypes.byref(self._h)))

    def stream(self, prompt, *, max_tokens=0, stop=(), stop_token_ids=(), ignore_eos=False,
               logprobs=False, top_logprobs=0, stream_sink=0, stream_window=0, logit_bias=None,
               **sampling):
        """Submits a request and returns its Stream. prompt: text (BOS added when the model asks,
        special tokens parsed) or a list of token ids. max_tokens 0: up to the context.
        sampling: temperature (0, the default: greedy), top_k, top_p, min_p,
        repetition_penalty, frequency_penalty, presence_penalty, penalty_last_n, seed.
        logit_bias: {token id: bias} added to those logits first (OpenAI's; -100 bans). stop:
        strings (the text ends before them) and stop_token_ids. logprobs / top_logprobs (0..20):
        each token's logprob and its most likely alternatives. stream_sink / stream_window > 0:
        StreamingLLM, constant memory for unbounded output. Raises SwiftInferError when the
        request is refused (e.g. SI_ERR_CONTEXT_FULL, with the numbers)."""
        unknown = set(sampling) - set(_SAMPLING)
        if unknown:
            raise TypeError(f"unknown sampling parameter(s) {sorted(unknown)}; "
                            f"known: {', '.join(_SAMPLING)}")
        r = lib.si_request_default()
        keep = []  # what r points at must outlive the submit
        if isinstance(prompt, str):
            keep.append(prompt.encode())
            r.prompt = keep[-1]
        else:
            ids = (ctypes.c_int32 * len(prompt))(*prompt)
            keep.append(ids)
            r.prompt_tokens, r.n_prompt_tokens = ids, len(prompt)
        for k, v in sampling.items():
            setattr(r.sampling, k, v)
        if logit_bias:
            arr = (LogitBias * len(logit_bias))(*[LogitBias(int(t), float(b))
                                                  for t, b in logit_bias.items()])
            keep.append(arr)
            r.sampling.logit_bias, r.sampling.n_logit_bias = arr, len(logit_bias)
        stops = [stop] if isinstance(stop, str) else list(stop)
        if stops:
            arr = (ctypes.c_char_p * len(stops))(*[s.encode() for s in stops])
            keep.append(arr)
            r.stop, r.n_stop = arr, len(stops)
        if stop_token_ids:
            ids = (ctypes.c_int32 * len(stop_token_ids))(*stop_token_ids)
            keep.append(ids)
            r.stop_token_ids, r.n_stop_token_ids = ids, len(stop_token_ids)
        r.max_tokens, r.ignore_eos = max_tokens, ignore_eos
        r.logprobs, r.top_logprobs = logprobs or top_logprobs > 0, top_logprobs
        r.stream_sink, r.stream_window = stream_sink, stream_window
        rid = ctypes.c_uint64()
        check(lib.si_engine_submit(self._handle(), ctypes.byref(r), ctypes.byref(rid)))
        return Stream(self, rid.value, bool(r.logprobs))

    def generate(self, prompt, **options):
        """Runs a request to the end and returns its Completion; options as stream's."""
        s = self.stream(prompt, **options)
        try:
            for _ in s:
                pass
        finally:
            s.cancel()  # only does something when interrupted (Ctrl-C)
        return s.completion

    def chat(self, messages, *, tools=None, **options):
        """generate() on a conversation (OpenAI-style messages, optional tools) rendered by the
        model's chat template (Model.apply_chat_template); the Completion's text is the
        assistant's reply."""
        return self.generate(self.model.apply_chat_template(messages, tools=tools), **options)

    def stats(self):
        """A snapshot after the engine's last step: running, waiting, kv_blocks_{total,used,free,
        cached}, prefix_hits, prefix_misses, tokens_computed, preemptions, steps,
        host_sampled_steps."""
        st = EngineStats()
        lib.si_engine_get_stats(self._handle(), ctypes.byref(st))
        return {name: getattr(st, name) for name, _ in EngineStats._fields_}
