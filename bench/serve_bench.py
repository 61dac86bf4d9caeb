#!/usr/bin/env python3
"""Serving benchmark: `llmk serve` against llama.cpp's `llama-server` on the
same GGUF file and thread count, driven by concurrent streaming clients.

For each server (started here on a free loopback port, one after the other,
so they never share the CPU) and each concurrency C (default 1, 8, 32): C
client threads share a fixed number of /v1/completions requests
(--requests-per-client x C, at least --min-requests), each streaming
--max-tokens tokens (end-of-generation banned, so every request generates
exactly that many: llmk through logit_bias, llama-server through
ignore_eos), with varied prompts. Printed per server and C:

- gen tok/s: completion tokens of all requests / the wall time from the
  first request sent to the last one finished;
- TTFT p50/p99: from sending a request to its first event with text;
- ITL p50/p99: inter-token latency, the gaps between a stream's text events.
  An event that carries k tokens (llmk sends every token generated since the
  reader last looked in one event; return_token_ids says how many) counts
  as k gaps of 1/k of its gap each, so a server that batches its events is
  neither rewarded nor punished for it.

Servers: llmk serve -np 32 -c CTX and llama-server -np 32 -cb -c 32*CTX
(llama-server's -c is shared by its slots, llmk's is per sequence), both
with -t THREADS. llama-server comes from bench/llamacpp_tools.sh
(build/llamacpp-tools/bin/llama-server, or --llama-server PATH); without one
the table has llmk's rows only, marked so. Python stdlib only. Not a test:
its figures are only as steady as the machine it runs on.

    bench/serve_bench.py [-m MODEL] [-t THREADS] [-C 1,8,32] [--max-tokens 64]
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["The capital of France is", "Write a short story about a lighthouse keeper.",
           "List three fruits and their colours:", "def fibonacci(n):", "Once upon a time",
           "Explain what a hash table is.", "The ocean is", "My favourite recipe is"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


class Proc:
    """A server process on 127.0.0.1:port; ready once /health is 200."""

    def __init__(self, name, argv, port, log):
        self.name, self.port = name, port
        self.log = open(log, "w")
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 180
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"{name} exited ({self.p.returncode}); see {log}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    c.close()
                    return
                c.close()
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{name} not ready after 180 s; see {log}")
            time.sleep(0.2)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def one_request(port, prompt, max_tokens, llmk):
    """Streams one completion: (t_sent, [(t_event, n_tokens)], completion_tokens)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.8, "seed": 1, "stream": True,
            "stream_options": {"include_usage": True}}
    if llmk:
        body.update(logit_bias={str(i): -100 for i in EOG}, return_token_ids=True)
    else:
        body.update(ignore_eos=True)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:300]!r}")
    events, usage = [], None
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        t = time.perf_counter()
        ev = json.loads(line[6:])
        if ev.get("usage"):
            usage = ev["usage"]["completion_tokens"]
        for ch in ev.get("choices") or []:
            if ch.get("text"):
                events.append((t, len(ch["token_ids"]) if "token_ids" in ch else 1))
    conn.close()
    return t0, events, usage if usage is not None else sum(k for _, k in events)


def run_level(port, clients, n_req, max_tokens, llmk):
    jobs = list(range(n_req))
    lock = threading.Lock()
    results, errors = [], []

    def worker():
        while True:
            with lock:
                if not jobs:
                    return
                i = jobs.pop()
            try:
                res = one_request(port, f"{PROMPTS[i % len(PROMPTS)]} (request {i})", max_tokens, llmk)
                with lock:
                    results.append(res)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(repr(e))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft, itl, toks = [], [], 0
    for t_sent, events, n in results:
        toks += n
        if not events:
            continue
        ttft.append(events[0][0] - t_sent)
        for (ta, _), (tb, k) in zip(events, events[1:]):
            itl.extend([(tb - ta) / k] * k)
    return {"clients": clients, "requests": len(results), "errors": errors, "tok_s": toks / wall, "wall": wall,
            "ttft50": percentile(ttft, 50), "ttft99": percentile(ttft, 99),
            "itl50": percentile(itl, 50), "itl99": percentile(itl, 99)}


EOG = (0, 2)  # SmolLM2's end-of-generation ids; --eog for another model


def main():
    global EOG
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", default=str(Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk"))
                                                 / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("-C", "--clients", default="1,8,32", help="concurrency levels (comma-separated)")
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--min-requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512, help="context per sequence")
    ap.add_argument("--eog", default="0,2", help="end-of-generation ids llmk bans (the model's)")
    ap.add_argument("--llmk", default=os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk")))
    ap.add_argument("--llama-server", default=str(ROOT / "build" / "llamacpp-tools" / "bin" / "llama-server"))
    ap.add_argument("--only", choices=["llmk", "llama-server"], help="one server only")
    a = ap.parse_args()
    EOG = tuple(int(x) for x in a.eog.split(","))
    levels = [int(x) for x in a.clients.split(",")]
    np_ = max(32, max(levels))
    logdir = ROOT / "build" / "serve_bench"
    logdir.mkdir(parents=True, exist_ok=True)

    servers = []
    if a.only != "llama-server":
        servers.append(("llmk", lambda port: [a.llmk, "serve", "-m", a.model, "--port", str(port), "-np", str(np_),
                                               "-c", str(a.ctx), "-t", str(a.threads), "--max-queue", "256"]))
    ls = a.llama_server if os.access(a.llama_server, os.X_OK) else shutil.which("llama-server")
    missing = None
    if a.only != "llmk":
        if ls:
            servers.append(("llama-server", lambda port: [ls, "-m", a.model, "--host", "127.0.0.1", "--port",
                                                          str(port), "-np", str(np_), "-cb", "-c",
                                                          str(np_ * a.ctx), "-t", str(a.threads)]))
        else:
            missing = f"llama-server not found ({a.llama_server}; build it with bench/llamacpp_tools.sh)"
            print(f"serve_bench: {missing}: llmk only", file=sys.stderr)

    rows = []
    for name, argv in servers:
        port = free_port()
        print(f"serve_bench: starting {name} on port {port}", file=sys.stderr)
        srv = Proc(name, argv(port), port, logdir / f"{name}.log")
        try:
            one_request(port, "Hello", 4, name == "llmk")  # warm-up
            for c in levels:
                n_req = max(a.min_requests, a.requests_per_client * c)
                r = run_level(port, c, n_req, a.max_tokens, name == "llmk")
                r["server"] = name
                rows.append(r)
                print(f"serve_bench: {name} C={c}: {r['requests']} requests in {r['wall']:.1f} s"
                      + (f", {len(r['errors'])} errors: {r['errors'][:2]}" if r["errors"] else ""), file=sys.stderr)
        finally:
            srv.stop()

    print(f"\nmodel {Path(a.model).name}, -t {a.threads}, -np {np_}, {a.max_tokens} tokens per request, "
          f"ctx {a.ctx} per sequence")
    if missing:
        print(f"NOTE: {missing}; llmk rows only")
    print(f"{'server':<13}{'C':>4}{'reqs':>6}{'gen tok/s':>11}{'TTFT p50':>10}{'TTFT p99':>10}"
          f"{'ITL p50':>9}{'ITL p99':>9}{'errors':>8}")
    for r in rows:
        print(f"{r['server']:<13}{r['clients']:>4}{r['requests']:>6}{r['tok_s']:>11.1f}"
              f"{r['ttft50'] * 1e3:>8.0f}ms{r['ttft99'] * 1e3:>8.0f}ms{r['itl50'] * 1e3:>7.1f}ms"
              f"{r['itl99'] * 1e3:>7.1f}ms{len(r['errors']):>8}")
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
