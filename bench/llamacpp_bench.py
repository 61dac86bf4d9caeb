"""pp/tg throughput of llama.cpp (through the PyPI package llama-cpp-python) on
a GGUF file, measured the way llama-bench does: pp = one batch of n_prompt
tokens; tg = n_gen single-token decode steps; each after d tokens of context
(untimed; llama-bench's -d, 0: an empty cache). Prints one
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
    ap.add_argument("-d", type=int, default=0)
    a = ap.parse_args()
    nb = max(a.p, 1)
    llm = llama_cpp.Llama(model_path=a.m, n_ctx=a.d + a.p + a.n + 16, n_batch=nb, n_ubatch=nb,
                          n_threads=a.t, n_threads_batch=a.t, verbose=False, logits_all=False)
    n_vocab = llm.n_vocab()
    ids = [(i * 7919 + 13) % n_vocab for i in range(a.d + max(a.p, 1))]
    context, prompt = ids[:a.d], ids[a.d:a.d + a.p]

    def start():
        llm.reset()
        llm._ctx.kv_cache_clear() if hasattr(llm._ctx, "kv_cache_clear") else None
        if context:
            llm.eval(context)

    pp, tg = [], []
    for _ in range(a.r + 1):  # first run warms up
        if a.p:
            start()
            t0 = time.perf_counter()
            llm.eval(prompt)
            pp.append(a.p / (time.perf_counter() - t0))
        start()
        tok = ids[a.d]
        t0 = time.perf_counter()
        for _ in range(a.n):
            llm.eval([tok])
            tok = (tok * 31 + 7) % n_vocab
        tg.append(a.n / (time.perf_counter() - t0))
    pp, tg = pp[1:], tg[1:]
    out = []
    if a.p:
        out.append({"test": f"pp{a.p}", "n_prompt": a.p, "n_gen": 0, "n_depth": a.d, "n_threads": a.t,
                    "avg_ts": statistics.mean(pp), "stddev_ts": statistics.pstdev(pp)})
    out.append({"test": f"tg{a.n}", "n_prompt": 0, "n_gen": a.n, "n_depth": a.d, "n_threads": a.t,
                "avg_ts": statistics.mean(tg), "stddev_ts": statistics.pstdev(tg)})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
