"""The C API (include/swiftinfer.h) through ctypes: the library, its structs and prototypes.

The structs mirror the header field for field; tests/python/test_python_api.py compares their
offsets and sizes with what the C compiler lays out, so a change to the header that is not made
here fails there.
"""
import ctypes
import ctypes.util
import os
import pathlib

# si_status names, in the header's order
STATUS_NAMES = ["SI_OK", "SI_ERR_IO", "SI_ERR_FORMAT", "SI_ERR_UNSUPPORTED", "SI_ERR_INVALID_ARG",
                "SI_ERR_NOMEM", "SI_ERR_NOT_FOUND", "SI_ERR_CONTEXT_FULL", "SI_ERR_INTERNAL"]

DEVICES = {"auto": 0, "cpu": 1, "cuda": 2}            # si_device
KV_CACHE_DTYPES = {"f16": 0, "auto": 0, "fp8": 1, "fp8_e4m3": 1}  # si_kv_cache_dtype
EVENT_NONE, EVENT_TOKEN, EVENT_FINISH, EVENT_ERROR = range(4)  # si_event_type
FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "cancelled", 4: "error"}  # si_finish_reason

SI_MAX_TOP_LOGPROBS = 20
SI_MAX_STOP_LEN = 128
SI_EVENT_TEXT_CAP = 1024

c_enum = ctypes.c_int


class ModelParams(ctypes.Structure):
    _fields_ = [("n_ctx", ctypes.c_int32), ("n_threads", ctypes.c_int32),
                ("verbose", ctypes.c_bool), ("device", c_enum)]


class LogitBias(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("bias", ctypes.c_float)]


class SamplingParams(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float),
                ("repetition_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("penalty_last_n", ctypes.c_int32),
                ("seed", ctypes.c_uint64), ("logit_bias", ctypes.POINTER(LogitBias)),
                ("n_logit_bias", ctypes.c_int32)]


class EngineParams(ctypes.Structure):
    _fields_ = [("max_num_seqs", ctypes.c_int32), ("max_batched_tokens", ctypes.c_int32),
                ("max_wait_ms", ctypes.c_int32), ("min_batch", ctypes.c_int32),
                ("kv_memory", ctypes.c_size_t), ("n_blocks", ctypes.c_int32),
                ("gpu_memory_fraction", ctypes.c_float), ("kv_cache_dtype", ctypes.c_int32)]


class Usage(ctypes.Structure):
    _fields_ = [("prompt_tokens", ctypes.c_int32), ("completion_tokens", ctypes.c_int32),
                ("cached_tokens", ctypes.c_int32)]


class TokenLogprob(ctypes.Structure):
    _fields_ = [("token", ctypes.c_int32), ("logprob", ctypes.c_float)]


class Event(ctypes.Structure):
    _fields_ = [("type", c_enum), ("id", ctypes.c_uint64), ("token", ctypes.c_int32),
                ("text_len", ctypes.c_size_t), ("text", ctypes.c_char * SI_EVENT_TEXT_CAP),
                ("logprob", ctypes.c_float), ("n_top", ctypes.c_int32),
                ("top", TokenLogprob * SI_MAX_TOP_LOGPROBS), ("finish_reason", c_enum),
                ("usage", Usage), ("status", c_enum), ("error", ctypes.c_char * 256)]


EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(Event), ctypes.c_void_p)


class Request(ctypes.Structure):
    _fields_ = [("prompt", ctypes.c_char_p), ("prompt_tokens", ctypes.POINTER(ctypes.c_int32)),
                ("n_prompt_tokens", ctypes.c_int32), ("sampling", SamplingParams),
                ("max_tokens", ctypes.c_int32), ("stop", ctypes.POINTER(ctypes.c_char_p)),
                ("n_stop", ctypes.c_int32), ("stop_token_ids", ctypes.POINTER(ctypes.c_int32)),
                ("n_stop_token_ids", ctypes.c_int32), ("ignore_eos", ctypes.c_bool),
                ("logprobs", ctypes.c_bool), ("top_logprobs", ctypes.c_int32),
                ("stream_sink", ctypes.c_int32), ("stream_window", ctypes.c_int32),
                ("on_event", EVENT_FN), ("user", ctypes.c_void_p)]


class Result(ctypes.Structure):
    _fields_ = [("text", ctypes.POINTER(ctypes.c_char)), ("text_len", ctypes.c_size_t),
                ("tokens", ctypes.POINTER(ctypes.c_int32)), ("n_tokens", ctypes.c_int32),
                ("finish_reason", c_enum), ("usage", Usage)]


class EngineStats(ctypes.Structure):
    _fields_ = [("running", ctypes.c_int32), ("waiting", ctypes.c_int32),
                ("kv_blocks_total", ctypes.c_int32), ("kv_blocks_used", ctypes.c_int32),
                ("kv_blocks_free", ctypes.c_int32), ("kv_blocks_cached", ctypes.c_int32),
                ("prefix_hits", ctypes.c_int64), ("prefix_misses", ctypes.c_int64),
                ("tokens_computed", ctypes.c_int64), ("preemptions", ctypes.c_int64),
                ("steps", ctypes.c_int64), ("host_sampled_steps", ctypes.c_int64)]


# the header's struct names, for the layout test
C_STRUCTS = {"si_model_params": ModelParams, "si_logit_bias": LogitBias,
             "si_sampling_params": SamplingParams,
             "si_engine_params": EngineParams, "si_usage": Usage,
             "si_token_logprob": TokenLogprob, "si_event": Event, "si_request": Request,
             "si_result": Result, "si_engine_stats": EngineStats}

P = ctypes.c_void_p  # opaque handles: si_model *, si_engine *
_PROTOTYPES = {
    "si_last_error": (ctypes.c_char_p, []),
    "si_status_name": (ctypes.c_char_p, [c_enum]),
    "si_model_default_params": (ModelParams, []),
    "si_model_load": (c_enum, [ctypes.c_char_p, ctypes.POINTER(ModelParams), ctypes.POINTER(P)]),
    "si_model_free": (None, [P]),
    "si_model_n_vocab": (ctypes.c_int32, [P]),
    "si_model_n_ctx": (ctypes.c_int32, [P]),
    "si_model_arch": (ctypes.c_char_p, [P]),
    "si_tokenize": (ctypes.c_int32, [P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_bool,
                                     ctypes.c_bool, ctypes.POINTER(ctypes.c_int32),
                                     ctypes.c_int32]),
    "si_token_to_piece": (ctypes.c_int32, [P, ctypes.c_int32, ctypes.c_char_p, ctypes.c_int32]),
    "si_token_bos": (ctypes.c_int32, [P]),
    "si_token_is_eog": (ctypes.c_bool, [P, ctypes.c_int32]),
    "si_chat_apply_template": (c_enum, [P, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_bool,
                                        ctypes.POINTER(ctypes.c_void_p)]),
    "si_free": (None, [ctypes.c_void_p]),
    "si_sampling_default_params": (SamplingParams, []),
    "si_engine_default_params": (EngineParams, []),
    "si_engine_create": (c_enum, [P, ctypes.POINTER(EngineParams), ctypes.POINTER(P)]),
    "si_engine_free": (None, [P]),
    "si_request_default": (Request, []),
    "si_engine_submit": (c_enum, [P, ctypes.POINTER(Request), ctypes.POINTER(ctypes.c_uint64)]),
    "si_engine_next_event": (c_enum, [P, ctypes.c_uint64, ctypes.POINTER(Event), ctypes.c_int]),
    "si_engine_cancel": (c_enum, [P, ctypes.c_uint64]),
    "si_generate": (c_enum, [P, ctypes.POINTER(Request), ctypes.POINTER(Result)]),
    "si_result_free": (None, [ctypes.POINTER(Result)]),
    "si_engine_get_stats": (None, [P, ctypes.POINTER(EngineStats)]),
}


def _candidates():
    env = os.environ.get("SWIFTINFER_LIB")
    if env:
        yield pathlib.Path(env)
        return
    root = pathlib.Path(__file__).resolve().parents[2]
    for build in (os.environ.get("SI_BUILD_DIR"), root / "build"):
        if build:
            yield pathlib.Path(build) / "libswiftinfer.so"
    found = ctypes.util.find_library("swiftinfer")
    if found:
        yield pathlib.Path(found)


def _load():
    tried = []
    for path in _candidates():
        if path.is_absolute() and not path.exists():
            tried.append(str(path))
            continue
        lib = ctypes.CDLL(str(path))
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        return lib
    raise OSError("libswiftinfer.so not found (looked at: " + ", ".join(tried or ["nothing"]) +
                  "); build it (make build: cmake target swiftinfer_shared) or set SWIFTINFER_LIB "
                  "to its path")


lib = _load()


class SwiftInferError(RuntimeError):
    """A failed call: status is the si_status name ("SI_ERR_FORMAT"), the message si_last_error's
    (what went wrong and where)."""

    def __init__(self, status, message):
        self.status = STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else str(status)
        super().__init__(f"{self.status}: {message}")


def check(status):
    """Raises SwiftInferError for a non-zero si_status, with this thread's si_last_error."""
    if status != 0:
        raise SwiftInferError(status, lib.si_last_error().decode(errors="replace"))


class Handle:
    """An object owning a C handle (self._h) that its class frees with _free (si_model_free,
    si_engine_free): close(), a `with` block or garbage collection frees it once."""
    _free = None   # the C function that frees the handle
    _what = "object"

    def close(self):
        if getattr(self, "_h", None):
            type(self)._free(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not getattr(self, "_h", None):
            raise ValueError(f"the {self._what} is closed")
        return self._h
