"""pp/tg throughput of llama.cpp (through the PyPI package llama-cpp-python) on
a GGUF file, measured the way llama-bench does: pp = one batch of n_prompt
tokens from an empty cache; tg = n_gen single-token decode steps. Prints one
JSON object with llama-bench's keys. Used by bench/compare.sh, not by tests."""
import argparse
import json
import statistics
import time

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", required=True)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=3)
    a = ap.parse_args()
    llm = llama_cpp.Llama(model_path=a.m, n_ctx=a.p + a.n + 16, n_batch=a.p, n_ubatch=a.p,
                          n_threads=a.t, n_threads_batch=a.t, verbose=False, logits_all=False)
    n_vocab = llm.n_vocab()
    prompt = [(i * 7919 + 13) % n_vocab for i in range(a.p)]
    pp, tg = [], []
    for _ in range(a.r + 1):  # first run warms up
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        t0 = time.perf_counter()
        llm.eval(prompt)
        pp.append(a.p / (time.perf_counter() - t0))
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        tok = prompt[0]
        t0 = time.perf_counter()
        for _ in range(a.n):
            llm.eval([tok])
            tok = (tok * 31 + 7) % n_vocab
        tg.append(a.n / (time.perf_counter() - t0))
    pp, tg = pp[1:], tg[1:]
    out = [
        {"test": f"pp{a.p}", "n_prompt": a.p, "n_gen": 0, "n_threads": a.t,
         "avg_ts": statistics.mean(pp), "stddev_ts": statistics.pstdev(pp)},
        {"test": f"tg{a.n}", "n_prompt": 0, "n_gen": a.n, "n_threads": a.t,
         "avg_ts": statistics.mean(tg), "stddev_ts": statistics.pstdev(tg)},
    ]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
