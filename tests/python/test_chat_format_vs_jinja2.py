"""chat_format_render (src/tokenizer/chat_format.c) against jinja2 rendering real chat templates.

jinja2 is the reference: it renders each template the way Hugging Face transformers does
(trim_blocks=True, lstrip_blocks=True). Our renderer is called through ctypes on
${SI_BUILD_DIR:-/work/main/build}/libswiftinfer.so (cmake target swiftinfer_shared).
Runs under pytest, or as a plain script.
"""
import ctypes
import os

import jinja2
import pytest

import chat_fixtures
from chat_fixtures import CHATML, SMOLLM2

# Meta-Llama-3-8B-Instruct tokenizer_config.json "chat_template".
LLAMA3 = (
    r"{% set loop_messages = messages %}{% for message in loop_messages %}"
    r"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    r"+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    r"{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    r"{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    r"{% endif %}"
)

TEMPLATES = {
    "smollm2": (SMOLLM2, 1, "<|im_start|>", "<|im_end|>"),
    "chatml": (CHATML, 1, "<|im_start|>", "<|im_end|>"),
    "llama3": (LLAMA3, 2, "<|begin_of_text|>", "<|eot_id|>"),
}  # name -> (source, chat_format enum value, bos_token, eos_token)

CONVERSATIONS = {
    **chat_fixtures.CONVERSATIONS,
    "whitespace_and_unicode": [
        {"role": "user", "content": "  padded\n\n"},
        {"role": "assistant", "content": "\tcafé — naïve 🙂 \n"},
        {"role": "user", "content": "line1\nline2 {{ not jinja }} {% raw %}"},
    ],
}


def _load():
    lib, libc = chat_fixtures.load_library()
    lib.chat_format_detect.argtypes = [ctypes.c_char_p]
    lib.chat_format_detect.restype = ctypes.c_int
    lib.chat_format_render.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(chat_fixtures.ChatMessage),
        ctypes.c_int,
        ctypes.c_bool,
        ctypes.POINTER(ctypes.c_void_p),
    ]
    lib.chat_format_render.restype = ctypes.c_int
    return lib, libc


@pytest.fixture(scope="module")
def lib():
    return _load()


def render_ours(lib, fmt, source, messages, add_generation_prompt):
    so, libc = lib
    arr, keep = chat_fixtures.message_array(messages)  # keep: the strings outlive the call
    out = ctypes.c_void_p()
    st = so.chat_format_render(fmt, source.encode(), arr, len(messages), add_generation_prompt,
                               ctypes.byref(out))
    assert st == 0, so.si_last_error().decode()
    try:
        return ctypes.string_at(out.value).decode()
    finally:
        libc.free(out)


def render_jinja(source, messages, add_generation_prompt, bos, eos):
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(source).render(messages=messages,
                                          add_generation_prompt=add_generation_prompt,
                                          bos_token=bos, eos_token=eos)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_detect(lib, name):
    source, fmt, _, _ = TEMPLATES[name]
    assert lib[0].chat_format_detect(source.encode()) == fmt


@pytest.mark.parametrize("gen", [True, False])
@pytest.mark.parametrize("conv", sorted(CONVERSATIONS))
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_matches_jinja2(lib, name, conv, gen):
    source, fmt, bos, eos = TEMPLATES[name]
    msgs = CONVERSATIONS[conv]
    want = render_jinja(source, msgs, gen, bos, eos)
    got = render_ours(lib, fmt, source, msgs, gen)
    assert got == want


def test_smollm2_default_system_is_real(lib):
    """Guards against a test that cannot fail: jinja2 does insert the default system prompt."""
    msgs = CONVERSATIONS["user_only"]
    want = render_jinja(SMOLLM2, msgs, True, "", "")
    assert want.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert render_ours(lib, 1, SMOLLM2, msgs, True) == want


def test_model_template_matches(lib):
    """The template in the default model file, when gguf is importable, is the one above."""
    gguf = pytest.importorskip("gguf")
    path = os.path.join(os.path.dirname(__file__), "..", "..", "models",
                        "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        pytest.skip("model file not present")
    f = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
    assert bytes(f.parts[f.data[0]]).decode() == SMOLLM2


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
