"""The default model against llama-cpp-python (an independent implementation, pinned in
tests/requirements.txt): identical token ids, identical greedy continuations, close logits."""
import numpy as np
import pytest

from conftest import run_cli

llama_cpp = pytest.importorskip("llama_cpp")
gguf = pytest.importorskip("gguf")

CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing   ",
    "\n\n\nnewlines\n\n and\ttabs\t\t here \r\n",
    "多语言文本：你好，世界！今天天气很好。",
    "日本語のテキストと한국어 텍스트",
    "Emoji: 🦙🚀👍🏽 and flags 🇫🇷🇯🇵, ZWJ 👩‍👩‍👧‍👦",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "int main(void) { printf(\"%d\\n\", 42); return 0; }",
    "Numbers: 3.14159 1234567890 1,000,000 0x1F",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|> special in the middle <|im_end|>",
    "Ünïcödé àccents, Ελληνικά, русский текст, עברית, العربية",
    "                                        many spaces",
    "a" * 300,
    "'s 're 've 'll 'd n't I'M YOU'RE",
    "",
]

# Prompts for the greedy comparison: plain text, chat, code, lists, other languages, and short
# factual chat questions (answers the model is sure of, so they do not hinge on near-ties).
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "def quicksort(arr):\n",
    "Les mathématiques sont",
    "1, 2, 3, 4, 5,",
    "10, 20, 30, 40,",
    "The quick brown fox",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "List three colors.<|im_end|>\n<|im_start|>assistant\n",
    "import numpy as np\n",
    "The first law of thermodynamics states that",
    "<!DOCTYPE html>\n<html>\n<head>\n",
    "<|im_start|>user\nWhat is the capital of Japan?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Italy?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Germany?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Spain?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of England?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Canada?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Egypt?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of Russia?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is the capital of China?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nWhat is 12 times 12?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nTranslate 'good morning' into Spanish.<|im_end|>\n<|im_start|>assistant\n",
]

N_GEN = 64


@pytest.fixture(scope="module")
def vocab(default_model):
    return llama_cpp.Llama(model_path=str(default_model), vocab_only=True, verbose=False)


def fresh_llama(model):
    """A new llama.cpp context: its logits depend slightly on what the KV cache held before (the
    attention sums run over a padded cache length), so each comparison starts clean."""
    return llama_cpp.Llama(model_path=str(model), n_ctx=512, n_batch=512, n_threads=2,
                           logits_all=True, verbose=False, seed=0)


def our_tokens(model, text):
    out = run_cli("tokenize", "-m", model, "--stdin", input=text.encode()).stdout.decode().split()
    return [int(t) for t in out]


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_token_ids_match(default_model, vocab, text):
    expected = vocab.tokenize(text.encode(), add_bos=True, special=True)
    assert our_tokens(default_model, text) == expected


def llama_greedy(model, prompt, n):
    """llama.cpp's greedy continuation (up to n tokens, ending at an end-of-generation token,
    which is not included), with the margin between its top two logits at each step."""
    llm = fresh_llama(model)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    llm.eval(llm.tokenize(prompt.encode(), add_bos=True, special=True))
    out, margins = [], []
    for _ in range(n):
        scores = np.array(llm.scores[llm.n_tokens - 1])
        top2 = np.argsort(-scores)[:2]
        margins.append(float(scores[top2[0]] - scores[top2[1]]))
        if llama_cpp.llama_vocab_is_eog(vocab, int(top2[0])):
            break
        out.append(int(top2[0]))
        llm.eval([out[-1]])
    return out, margins


def our_greedy(model, prompt, n):
    proc = run_cli("run", "-m", model, "-p", prompt, "-n", n, "--greedy", "--print-ids",
                   "--no-stats", "-c", 512)
    return [int(t) for t in proc.stdout.decode().split()]


# Numerical noise between two correct implementations of this Q4_1 model. Activations are
# re-quantised to 8 bits before every matmul, so a difference of one float ulp anywhere can move a
# value across a rounding boundary and change it by a whole quantisation step; across 30 layers
# this makes last-token logits differ by up to ~0.8 (rms ~0.2-0.4). llama.cpp is no more
# consistent with itself: on the haiku prompt below its logits from a batched prefill and from a
# token-by-token prefill differ by 0.80 max (rms 0.31), and they shift when the KV cache held
# another sequence before. Dequantising the model to f32 removes the effect: our logits then
# agree with llama.cpp's to 0.01 (see bench/RESULTS.md, "Agreement with llama.cpp"), which is
# what shows the architecture itself is computed identically.
NOISE_MAX = 1.5      # largest |logit difference| accepted (measured up to 1.11)
NOISE_RMS = 0.45     # rms logit difference accepted (measured up to 0.41)
NEAR_TIE = 1.0       # top-2 margins below this are within noise: greedy may pick either


@pytest.fixture(scope="module")
def greedy_results(default_model):
    return {p: (llama_greedy(default_model, p, N_GEN), our_greedy(default_model, p, N_GEN))
            for p in PROMPTS}


def assert_diverges_only_at_near_tie(got, expected, margins):
    """got (our greedy ids) may leave expected (llama.cpp's) only where llama.cpp's top-2 margin
    at that step is below NEAR_TIE."""
    for i in range(max(len(got), len(expected))):
        a = got[i] if i < len(got) else "end"
        b = expected[i] if i < len(expected) else "end"
        if a != b:
            assert margins[i] < NEAR_TIE, (
                f"diverged at step {i} ({a} vs {b}) where llama.cpp's top-2 margin is "
                f"{margins[i]:.3f}")
            break


@pytest.mark.parametrize("prompt", PROMPTS, ids=range(len(PROMPTS)))
def test_greedy_diverges_only_at_near_ties(greedy_results, prompt):
    (expected, margins), got = greedy_results[prompt]
    assert_diverges_only_at_near_tie(got, expected, margins)


def test_greedy_continuations_identical_for_five_prompts(greedy_results):
    identical = [p for p, ((exp, _), got) in greedy_results.items() if got == exp]
    print(f"{len(identical)} of {len(PROMPTS)} prompts identical (up to {N_GEN} tokens)")
    assert len(identical) >= 5, identical


def last_logits(model, prompt, tmp_path, n_ctx):
    """(ours, llama.cpp's) logits after the prompt's last token, each from a fresh context"""
    llm = fresh_llama(model)
    llm.eval(llm.tokenize(prompt.encode(), add_bos=True, special=True))
    expected = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
    out = tmp_path / "logits.f32"
    run_cli("run", "-m", model, "-p", prompt, "-n", 0, "--logits-out", out, "--no-stats",
            "-c", n_ctx)
    got = np.fromfile(out, dtype=np.float32)
    assert got.shape == expected.shape
    return got, expected


@pytest.mark.parametrize("prompt", PROMPTS[:4], ids=range(4))
def test_last_token_logits_close(default_model, prompt, tmp_path):
    got, expected = last_logits(default_model, prompt, tmp_path, 512)
    diff = got - expected
    rms = float(np.sqrt(np.mean(diff ** 2)))
    print(f"max |diff| {np.abs(diff).max():.4f}, rms {rms:.4f}, span {np.ptp(expected):.2f}")
    assert np.abs(diff).max() <= NOISE_MAX
    assert rms <= NOISE_RMS
    assert int(np.argmax(got)) == int(np.argmax(expected))


def dequantised_copy(src, dst):
    """Writes src with every tensor dequantised to f32, using the gguf package (not our code)."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=None)
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape")
                         for i in field.data]
            else:
                value = [field.parts[i][0].item() for i in field.data]
            writer.add_key_value(key, value, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]).decode(), vtype)
        else:
            writer.add_key_value(key, field.parts[field.data[0]][0].item(), vtype)
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        writer.add_tensor(t.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# With f32 weights nothing is re-quantised, so the two implementations differ only by float
# summation order and llama.cpp's f16 rounding inside attention: measured max 0.010 on these
# prompts (logit span ~37). 0.05 leaves room for that and still fails on any real error (a wrong
# RoPE pairing or a missing norm weight moves logits by whole units).
F32_TOL = 0.05


def test_dequantised_model_logits_match_closely(default_model, tmp_path):
    f32 = tmp_path / "smollm2-f32.gguf"
    dequantised_copy(default_model, f32)
    for prompt in PROMPTS[:3]:
        got, expected = last_logits(f32, prompt, tmp_path, 512)
        diff = np.abs(got - expected)
        print(f"f32 model: max |diff| {diff.max():.4f} for {prompt[:30]!r}")
        assert diff.max() <= F32_TOL


def test_end_of_generation_tokens_match(default_model):
    """Every token llama.cpp treats as end-of-generation, and no other, stops our generation."""
    import ctypes
    from conftest import BUILD
    lib = ctypes.CDLL(str(BUILD / "libswiftinfer.so"))
    lib.si_model_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.si_token_is_eog.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.si_token_is_eog.restype = ctypes.c_bool
    lib.si_model_n_vocab.argtypes = [ctypes.c_void_p]
    lib.si_model_free.argtypes = [ctypes.c_void_p]
    model = ctypes.c_void_p()
    assert lib.si_model_load(str(default_model).encode(), None, ctypes.byref(model)) == 0
    try:
        ours = {t for t in range(lib.si_model_n_vocab(model)) if lib.si_token_is_eog(model, t)}
    finally:
        lib.si_model_free(model)
    llm = llama_cpp.Llama(model_path=str(default_model), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    theirs = {t for t in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)}
    assert ours == theirs


# Synthetic models (tiny's shape, the default model's tokenizer, seeded random weights) in types
# the default model does not have, the whole forward pass against llama.cpp's on one prompt. Both
# quantise the activations alike (q8_0 for iq4_nl, q8_K for the k-quants and iq4_xs) and sum the
# same integer products, so only float summation order differs: measured max |diff| / logit span
# 5e-8 to 1.4e-7 on these (seed 3). 1e-4 leaves room for another llama.cpp build's order; one
# iq4 table value off by one (113 -> 112) gives 7e-3 and 1e-2.
SYNTH_TYPES = ["q2_k", "q3_k", "q3_k_m", "iq4_nl", "iq4_xs"]
SYNTH_TOL = 1e-4


@pytest.mark.parametrize("qtype", SYNTH_TYPES)
def test_synth_type_logits_match(default_model, tmp_path, qtype):
    model = tmp_path / f"tiny-{qtype}.gguf"
    run_cli("synth", "-o", model, "--type", qtype, "--vocab-from", default_model, "--seed", 3)
    got, expected = last_logits(model, PROMPTS[1], tmp_path, 256)
    rel = np.abs(got - expected).max() / (expected.max() - expected.min())
    print(f"{qtype}: max |diff| / span {rel:.2e}")
    assert rel <= SYNTH_TOL
