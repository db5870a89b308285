"""The Python API (python/swiftinfer, ctypes over libswiftinfer.so) on the default model: its
structs laid out as the C compiler lays out the header's, its tokens and greedy continuations
against llama-cpp-python's, streaming, seeded sampling, cancellation, concurrency and errors."""
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

from conftest import BUILD, ROOT

os.environ.setdefault("SWIFTINFER_LIB", str(BUILD / "libswiftinfer.so"))
sys.path.insert(0, str(ROOT / "python"))
import swiftinfer  # noqa: E402
from swiftinfer import _capi  # noqa: E402

llama_cpp = pytest.importorskip("llama_cpp")
from test_vs_llama_cpp import (PROMPTS, assert_diverges_only_at_near_tie,  # noqa: E402
                               llama_greedy)


def test_structs_match_the_c_layout(tmp_path):
    """Every mirrored struct's size and every field's offset, against a C program compiled on the
    header: a field added, removed or retyped in swiftinfer.h and not in _capi.py fails here."""
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "swiftinfer.h"',
             "int main(void) {"]
    want = {}
    for cname, cls in _capi.C_STRUCTS.items():
        lines.append(f'printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        want[(cname, "sizeof")] = ctypes_size = __import__("ctypes").sizeof(cls)
        assert ctypes_size > 0
        for fname, _ in cls._fields_:
            lines.append(f'printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
            want[(cname, fname)] = getattr(cls, fname).offset
    lines.append("return 0; }")
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines))
    subprocess.run([cc, "-std=c11", "-I", str(ROOT / "include"), "-o", str(exe), str(src)],
                   check=True)
    got = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        s, f, v = line.split()
        got[(s, f)] = int(v)
    assert got == want


@pytest.fixture(scope="module")
def model(default_model):
    with swiftinfer.Model(default_model, n_ctx=512, n_threads=2) as m:
        yield m


@pytest.fixture(scope="module")
def engine(model):
    with swiftinfer.Engine(model, max_num_seqs=8, n_blocks=256) as e:
        yield e


@pytest.fixture(scope="module")
def vocab(default_model):
    return llama_cpp.Llama(model_path=str(default_model), vocab_only=True, verbose=False)


def test_model_facts(model):
    assert model.arch == "llama" and model.n_vocab == 49152 and model.n_ctx == 512
    assert model.is_eog(model.tokenize("<|im_end|>", add_special=False)[0])
    assert not model.is_eog(model.tokenize("Hello", add_special=False)[0])


@pytest.mark.parametrize("text", ["Hello, world!", "  leading spaces and trailing   ",
                                  "多语言文本：你好，世界！", "Emoji: 🦙🚀👍🏽",
                                  "<|im_start|>user\nWhat is 2+2?<|im_end|>\n", ""])
def test_tokenize_matches_llama_cpp(model, vocab, text):
    assert model.tokenize(text) == vocab.tokenize(text.encode(), add_bos=True, special=True)
    # control tokens render as "": special text round-trips as plain characters
    plain = model.tokenize(text, add_special=False, parse_special=False)
    assert model.detokenize(plain) == text


def test_greedy_matches_llama_cpp(default_model, model, engine):
    """Greedy continuations through the engine against llama.cpp's: where they differ, only at a
    near-tie (as test_vs_llama_cpp allows the CLI), and half the prompts identical. Which
    near-ties flip depends on llama.cpp's SIMD path: with setup.sh's AVX2 build (2026-12-04)
    prompts 1, 2 and 4 leave it at top-2 margins 0.63, 0.03 and 0.05, the other 3 match."""
    n, identical = 32, 0
    for prompt in PROMPTS[:6]:
        expected, margins = llama_greedy(default_model, prompt, n)
        c = engine.generate(prompt, max_tokens=n)
        got = [t for t in c.tokens if not model.is_eog(t)]
        assert c.finish_reason in ("stop", "length")
        assert c.usage["completion_tokens"] == len(c.tokens)
        assert_diverges_only_at_near_tie(got, expected, margins)
        identical += got == expected
    assert identical >= 3, identical


def test_stream_is_generate_and_text_is_the_tokens(model, engine):
    prompt = "Once upon a time, in a small village,"
    whole = engine.generate(prompt, max_tokens=24, ignore_eos=True)
    toks = list(engine.stream(prompt, max_tokens=24, ignore_eos=True))
    assert [t.token for t in toks] == whole.tokens and len(toks) == 24
    assert "".join(t.text for t in toks) == whole.text == model.detokenize(whole.tokens)
    assert whole.finish_reason == "length"


def test_seeded_sampling_repeats_and_seeds_differ(engine):
    kw = dict(max_tokens=24, ignore_eos=True, temperature=0.9, top_p=0.95)
    a = engine.generate("Tell me a story.", seed=7, **kw)
    b = engine.generate("Tell me a story.", seed=7, **kw)
    c = engine.generate("Tell me a story.", seed=8, **kw)
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens


def test_stop_strings_and_logprobs(engine):
    c = engine.generate("1, 2, 3, 4, 5,", max_tokens=32, stop=[" 8"], logprobs=True,
                        top_logprobs=3)
    assert c.finish_reason == "stop" and " 8" not in c.text and c.text.strip().endswith("7,")
    assert len(c.logprobs) == len(c.tokens)
    for tok in c.logprobs:
        assert tok.logprob <= 0 and len(tok.top_logprobs) == 3
        assert tok.top_logprobs[0][1] >= tok.logprob - 1e-5  # greedy: the top one, or tied


def test_cancel_returns_what_was_produced(engine):
    s = engine.stream("Write a long essay about the sea.", max_tokens=400, ignore_eos=True)
    got = [next(s) for _ in range(5)]
    c = s.cancel()
    assert c.finish_reason == "cancelled"
    assert c.tokens[:5] == [t.token for t in got] and 5 <= len(c.tokens) < 400
    assert c.usage["completion_tokens"] == len(c.tokens)
    assert s.cancel() is c  # again: nothing more


def test_threads_batch_together_with_the_same_results(engine):
    """Requests from several threads run batched; each gets what it gets alone."""
    prompts = PROMPTS[:6]
    alone = [engine.generate(p, max_tokens=16, ignore_eos=True).tokens for p in prompts]
    out = [None] * len(prompts)
    steps_before = engine.stats()["steps"]

    def run(i):
        out[i] = engine.generate(prompts[i], max_tokens=16, ignore_eos=True).tokens

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == alone
    # six requests of 16 tokens alone would take >= 6 * 16 steps
    assert engine.stats()["steps"] - steps_before < len(prompts) * 16


def test_logit_bias(engine):
    """logit_bias={id: bias}: -100 bans the greedy pick (another token comes, the logprobs still
    the model's, where the banned one stays on top), +100 forces a token; bad ids are refused."""
    prompt = "The capital of France is"
    base = engine.generate(prompt, max_tokens=1, logprobs=True, top_logprobs=1)
    t = base.tokens[0]
    banned = engine.generate(prompt, max_tokens=1, logprobs=True, top_logprobs=1,
                             logit_bias={t: -100})
    assert banned.tokens[0] != t and banned.logprobs[0].top_logprobs[0][0] == t
    forced = engine.generate(prompt, max_tokens=3, ignore_eos=True, logit_bias={t + 1: 100})
    assert forced.tokens == [t + 1] * 3
    with pytest.raises(swiftinfer.SwiftInferError, match="logit_bias token -1"):
        engine.generate(prompt, max_tokens=1, logit_bias={-1: 1.0})
    with pytest.raises(swiftinfer.SwiftInferError, match="finite"):
        engine.generate(prompt, max_tokens=1, logit_bias={3: float("inf")})


def test_errors_name_what_is_wrong(default_model, engine, tmp_path):
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_IO.*nonexistent"):
        swiftinfer.Model(tmp_path / "nonexistent.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(pathlib.Path(default_model).read_bytes()[:4096])
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_FORMAT"):
        swiftinfer.Model(bad)
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_CONTEXT_FULL.*512"):
        engine.generate("word " * 600, max_tokens=4)
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_INVALID_ARG"):
        engine.generate("Hello", top_logprobs=21)
    with pytest.raises(TypeError, match="temprature"):
        engine.generate("Hello", temprature=0.5)
    with pytest.raises(ValueError, match="device"):
        swiftinfer.Model(default_model, device="tpu")
    with pytest.raises(TypeError, match="max_seqs"):
        swiftinfer.Engine(engine.model, max_seqs=4)


def test_device_cuda_runs_or_says_why(default_model):
    """device="cuda": on a GPU machine with a CUDA build it generates; elsewhere the load says
    why not (no GPU visible, or a build without CUDA)."""
    try:
        m = swiftinfer.Model(default_model, n_ctx=256, device="cuda")
    except swiftinfer.SwiftInferError as e:
        assert e.status == "SI_ERR_UNSUPPORTED" and "cuda" in str(e).lower(), e
        return
    with m, swiftinfer.Engine(m, n_blocks=64) as e:
        assert len(e.generate("Hello", max_tokens=8, ignore_eos=True).tokens) == 8


# ---- chat: the model's template, against jinja2 and llama.cpp's tokens ----------------------

CONVERSATION = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Name a colour."},
                {"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "Another one?"}]


def test_chat_template_matches_jinja2(model, vocab):
    from test_chat_template_vs_jinja2 import render_jinja
    source = vocab.metadata["tokenizer.chat_template"]
    for msgs in (CONVERSATION, CONVERSATION[1:2]):
        for gen in (True, False):
            want = render_jinja(source, msgs, gen, "<|im_start|>", "<|im_end|>")
            assert model.apply_chat_template(msgs, add_generation_prompt=gen) == want
    assert model.apply_chat_template(CONVERSATION).endswith("<|im_start|>assistant\n")


def test_chat_greedy_matches_llama_cpp(default_model, model, engine):
    prompt = model.apply_chat_template(CONVERSATION[1:2])
    expected, margins = llama_greedy(default_model, prompt, 24)
    got = [t for t in engine.chat(CONVERSATION[1:2], max_tokens=24).tokens
           if not model.is_eog(t)]
    assert_diverges_only_at_near_tie(got, expected, margins)


@pytest.mark.parametrize("add_bos", [False, True])
def test_chat_prompt_gets_one_bos(default_model, tmp_path, add_bos):
    """A template that writes bos_token itself, on a model whose tokenizer adds BOS or not: the
    prompt tokenises to what llama.cpp gives for the template's text without an added BOS."""
    f = tmp_path / "bos.gguf"
    template = ("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                "{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--special-token",
                    "bos", "<|endoftext|>", "--chat-template", template, str(default_model),
                    str(f)], check=True, capture_output=True)
    if add_bos:  # the default model's is False (gguf_set_metadata reads any text as True)
        subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_set_metadata", "--force",
                        str(f), "tokenizer.ggml.add_bos_token", "1"], check=True,
                       capture_output=True)
    from test_chat_template_vs_jinja2 import render_jinja
    text = render_jinja(template, CONVERSATION[1:2], True, "<|endoftext|>", "<|im_end|>")
    ref = llama_cpp.Llama(model_path=str(f), vocab_only=True, verbose=False)
    assert ref.metadata["tokenizer.ggml.add_bos_token"] == str(add_bos).lower()
    want = ref.tokenize(text.encode(), add_bos=False, special=True)
    assert want[0] == 0 and want[1] != 0  # <|endoftext|> once, then the conversation
    with swiftinfer.Model(f) as m:
        prompt = m.apply_chat_template(CONVERSATION[1:2])
        assert prompt == (text[len("<|endoftext|>"):] if add_bos else text)
        assert m.tokenize(prompt) == want


def test_chat_errors(model, tmp_path, binary):
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_INVALID_ARG.*array"):
        model.apply_chat_template({"role": "user"})
    with pytest.raises(swiftinfer.SwiftInferError, match="SI_ERR_FORMAT.*line"):
        model.apply_chat_template([{"role": "user"}])  # no content: the template fails
    tiny = tmp_path / "tiny.gguf"
    subprocess.run([str(binary), "synth", "-o", str(tiny), "--shape", "tiny"], check=True,
                   capture_output=True)
    with swiftinfer.Model(tiny) as m, pytest.raises(swiftinfer.SwiftInferError,
                                                     match="SI_ERR_NOT_FOUND.*chat template"):
        m.apply_chat_template(CONVERSATION)
