"""tests/cuda/python_api_gpu.py MODEL [LOGPROB_TOL] — the Python API with device="cuda" on the
GPU machine (tests/cuda/run.sh runs it; SWIFTINFER_LIB names a CUDA build of libswiftinfer.so).

The same greedy requests go through Engine on Model(device="cuda") and Model(device="cpu"),
three at once (batched), with top-2 logprobs. GPU and CPU round differently, so the tokens may
part where the CPU's best two are within 2 x LOGPROB_TOL; before that they must agree, and the
logprob of each agreed token must be within LOGPROB_TOL (nats; default 0.01, for F16 weights;
run.sh gives the quantised types 0.05: their GPU kernels round x to 8 bits unlike the CPU's).
Then a GPU stream is cancelled after a few tokens and must return what it produced. Prints one
line per check and "PYAPI: PASS" or "PYAPI: FAIL".
"""
import sys
import threading

from swiftinfer import Engine, Model

N_TOKENS = 24
LOGPROB_TOL = 0.01  # nats, |GPU - CPU| of a token's logprob (argv[2] overrides)
PROMPTS = ["Hello", "The quick brown fox", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]]


def run_all(engine):
    """The PROMPTS at once, each in its own thread, so the engine batches them."""
    out = [None] * len(PROMPTS)

    def one(i):
        out[i] = engine.generate(PROMPTS[i], max_tokens=N_TOKENS, ignore_eos=True,
                                 top_logprobs=2)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def compare(i, gpu, cpu):
    """Whether GPU and CPU agree up to the first near-tie; prints what it found."""
    if len(gpu.tokens) != N_TOKENS or gpu.finish_reason != "length":
        print(f"FAIL prompt {i}: GPU gave {len(gpu.tokens)} tokens ({gpu.finish_reason})")
        return False
    for pos, (g, c) in enumerate(zip(gpu.logprobs, cpu.logprobs)):
        top = c.top_logprobs
        margin = top[0][1] - top[1][1] if len(top) > 1 else float("inf")
        if g.token != c.token:
            if margin < 2 * LOGPROB_TOL:
                print(f"PASS prompt {i}: {pos} tokens agree, then a near-tie (CPU margin "
                      f"{margin:.3f} nats)")
                return True
            print(f"FAIL prompt {i}: token {pos}: GPU {g.token}, CPU {c.token} (CPU margin "
                  f"{margin:.3f} nats)")
            return False
        if abs(g.logprob - c.logprob) > LOGPROB_TOL:
            print(f"FAIL prompt {i}: token {pos} logprob GPU {g.logprob:.4f} CPU {c.logprob:.4f}")
            return False
    worst = max(abs(g.logprob - c.logprob) for g, c in zip(gpu.logprobs, cpu.logprobs))
    print(f"PASS prompt {i}: all {N_TOKENS} tokens agree, max |logprob diff| {worst:.4f}")
    return True


def check_cancel(engine):
    """A stream cancelled after 4 tokens returns them, finish_reason "cancelled"."""
    s = engine.stream("Hello", max_tokens=0, ignore_eos=True)
    got = [next(s).token for _ in range(4)]
    c = s.cancel()
    ok = c.finish_reason == "cancelled" and c.tokens[:4] == got
    print(f"{'PASS' if ok else 'FAIL'} cancel: {len(c.tokens)} tokens returned "
          f"({c.finish_reason})")
    return ok


def main():
    global LOGPROB_TOL
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    if len(sys.argv) == 3:
        LOGPROB_TOL = float(sys.argv[2])
    ok = True
    with Model(sys.argv[1], device="cpu") as m, Engine(m) as e:
        cpu = run_all(e)
    with Model(sys.argv[1], device="cuda") as m, Engine(m) as e:
        gpu = run_all(e)
        for i in range(len(PROMPTS)):
            ok &= compare(i, gpu[i], cpu[i])
        ok &= check_cancel(e)
        st = e.stats()
        print(f"engine stats on the GPU: steps {st['steps']}, tokens computed "
              f"{st['tokens_computed']}")
    print("PYAPI:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
