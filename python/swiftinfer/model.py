"""A loaded GGUF model and its tokenizer."""
import ctypes
import json

from ._capi import DEVICES, Handle, SwiftInferError, check, lib


class Model(Handle):
    """A GGUF model, mapped read-only (si_model_load).

    n_ctx: context window in tokens (0: the model's trained length, capped at 4096);
    n_threads: CPU threads (0: all online cores); device: "auto" (the GPU when the library was
    built with CUDA and one is present), "cpu" or "cuda"; verbose: load progress on stderr.
    Raises SwiftInferError naming the file, tensor or key when the model cannot be loaded.
    close() (or the end of a `with` block) frees it; every engine on it must be closed first."""
    _free = staticmethod(lib.si_model_free)
    _what = "model"

    def __init__(self, path, *, n_ctx=0, n_threads=0, device="auto", verbose=False):
        if device not in DEVICES:
            raise ValueError(f"device must be one of {sorted(DEVICES)}, not {device!r}")
        p = lib.si_model_default_params()
        p.n_ctx, p.n_threads, p.verbose, p.device = n_ctx, n_threads, verbose, DEVICES[device]
        self._h = ctypes.c_void_p()
        check(lib.si_model_load(str(path).encode(), ctypes.byref(p), ctypes.byref(self._h)))
        self.path = str(path)


    @property
    def n_vocab(self):
        return lib.si_model_n_vocab(self._handle())

    @property
    def n_ctx(self):
        return lib.si_model_n_ctx(self._handle())

    @property
    def arch(self):
        return lib.si_model_arch(self._handle()).decode()

    @property
    def bos(self):
        """The beginning-of-sequence token, or None."""
        t = lib.si_token_bos(self._handle())
        return None if t < 0 else t

    def is_eog(self, token):
        """Whether the token ends generation (EOS, <|im_end|>, <|eot_id|>, ...)."""
        return bool(lib.si_token_is_eog(self._handle(), token))

    def tokenize(self, text, *, add_special=True, parse_special=True):
        """Token ids of text (str or UTF-8 bytes). add_special: BOS first when the model asks for
        it; parse_special: "<|im_end|>" and the like become their special tokens."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        h = self._handle()
        cap = len(data) + 8
        while True:
            out = (ctypes.c_int32 * cap)()
            n = lib.si_tokenize(h, data, len(data), add_special, parse_special, out, cap)
            if n < 0:
                raise SwiftInferError(4, lib.si_last_error().decode(errors="replace"))
            if n <= cap:
                return list(out[:n])
            cap = n

    def token_bytes(self, token):
        """The bytes of one token as it appears in text (control tokens: b"")."""
        h = self._handle()
        buf = ctypes.create_string_buffer(64)
        n = lib.si_token_to_piece(h, token, buf, 64)
        if n < 0:
            raise ValueError(f"token {token} is not in the vocabulary (0..{self.n_vocab - 1})")
        if n > 64:
            buf = ctypes.create_string_buffer(n)
            n = lib.si_token_to_piece(h, token, buf, n)
        return buf.raw[:n]

    def detokenize(self, tokens):
        """The text of token ids (invalid UTF-8 from a cut-off character shows as U+FFFD)."""
        return b"".join(self.token_bytes(t) for t in tokens).decode(errors="replace")

    def apply_chat_template(self, messages, *, tools=None, add_generation_prompt=True):
        """The prompt for a conversation, rendered with the model's own chat template as
        transformers' apply_chat_template renders it: messages as in an OpenAI request
        ([{"role": "user", "content": "Hi"}, ...]), tools a list of tool definitions or None.
        Ready for Engine.generate / stream (the BOS the tokenizer adds is not in it twice)."""
        out = ctypes.c_void_p()
        check(lib.si_chat_apply_template(self._handle(), json.dumps(messages).encode(),
                                         None if tools is None else json.dumps(tools).encode(),
                                         add_generation_prompt, ctypes.byref(out)))
        try:
            return ctypes.string_at(out).decode()
        finally:
            lib.si_free(out)
