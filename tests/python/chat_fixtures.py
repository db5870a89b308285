"""What the two chat-template tests against jinja2 share (test_chat_format_vs_jinja2.py,
test_chat_template_vs_jinja2.py): two templates both render, the conversations both render them
with, and the ctypes plumbing of ${SI_BUILD_DIR:-/work/main/build}/libswiftinfer.so."""
import ctypes
import ctypes.util
import os

import pytest

# tokenizer.chat_template of SmolLM2-135M-Instruct (models/SmolLM2-135M-Instruct.Q4_1.gguf):
# the literals hold real newlines.
SMOLLM2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)

# A standard ChatML template, with Jinja escapes (backslash-n) as JSON-decoded configs hold them.
CHATML = (
    r"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    r" + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    r"{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CONVERSATIONS = {  # each test adds its own
    "empty": [],
    "user_only": [{"role": "user", "content": "Hello!"}],
    "with_system": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
        {"role": "user", "content": "Why?"},
    ],
    "system_multi_turn": [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Good morning"},
        {"role": "assistant", "content": "Bonjour"},
        {"role": "user", "content": "Thanks"},
    ],
    "empty_content": [{"role": "user", "content": ""}],
}


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


def message_array(messages):
    """The messages as a C array of ChatMessage, and the encoded strings that must outlive it."""
    arr = (ChatMessage * max(1, len(messages)))()
    keep = []
    for i, m in enumerate(messages):
        r, c = m["role"].encode(), m["content"].encode()
        keep += [r, c]
        arr[i] = ChatMessage(r, c)
    return arr, keep


def load_library():
    """libswiftinfer.so (skips the test when it is not built) and libc, for free()."""
    build = os.environ.get("SI_BUILD_DIR", "/work/main/build")
    path = os.path.join(build, "libswiftinfer.so")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built (cmake --build ... --target swiftinfer_shared)")
    # NOTE: lazy binding, so that a symbol still missing from another module (the library is
    # built from every src/ file) does not stop a test that calls only a few.
    lib = ctypes.CDLL(path, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    lib.si_last_error.restype = ctypes.c_char_p
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.free.argtypes = [ctypes.c_void_p]
    return lib, libc
