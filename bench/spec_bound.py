#!/usr/bin/env python3
"""How far prompt lookup (`--spec ngram`) can speed up greedy decoding of a
prompt, whatever its draft-length policy: the model's greedy output (from
`llmk run --print-ids`) replayed against the drafter's rule (the longest
earlier match of the context's suffix, at least 2 tokens, compared up to 16,
the latest on ties; its continuation is the draft), with the draft cut
exactly where the output leaves it. That oracle drafts no token the target
rejects, so

    speedup <= tokens / sum over steps of (1 + c * drafted tokens)

where c is what one more row costs a verify step, as a share of a plain
decoding step at that depth. `llmk bench --spec` implies it: a verify step
costs tok/step / speedup plain steps for (tok/step - 1) / acceptance rows
more; its copy_text row on the 2-core Zen 5 host, 2026-12-07 (4.55 tokens a
step, 83.6%, 2.3-2.6x), gives c = 0.18-0.21. A bound below 2 at the
measured c says the prompt's output does not copy enough for issue 21's
goal with this model, whatever the length policy. Also printed: the same
replay with fixed draft lengths (every drafted token costs c). Steps here
include those without a draft (bench --spec's tok/step counts verify steps
only). A measurement tool, not a test.

    .venv/bin/python bench/spec_bound.py -f bench/prompts/copy_code.txt [-m MODEL] [-n 256] [-c 0.2,0.3]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LLMK = os.path.join(ROOT, "build", "llmk")


def llmk(*args, stdin=None):
    r = subprocess.run([LLMK, *args], input=stdin, capture_output=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"llmk {args[0]}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def token_streams(model, path, n):
    """(prompt ids as bench --spec formats the file: one user turn in the chat template, output ids)"""
    text = open(path, encoding="utf-8").read()
    margs = ["-m", model] if model else []
    rendered = llmk("template", *margs, "--messages", "-",
                    stdin=json.dumps([{"role": "user", "content": text}]).encode())
    prompt = json.loads(llmk("tokenize", *margs, "--special", "-f", "-", stdin=rendered))
    out = json.loads(llmk("run", *margs, "-f", path, "--chat", "-n", str(n), "--temp", "0", "--print-ids"))
    return prompt, out


def draft(hist, nmin=2, nmax=16):
    """The continuation of the latest longest earlier match of hist's suffix."""
    n, best, end = len(hist), 0, -1
    for e in range(n - 1, 0, -1):
        m = 0
        while m < nmax and e - m - 1 >= 0 and hist[e - m - 1] == hist[n - m - 1]:
            m += 1
        if m > best:
            best, end = m, e
            if m == nmax:
                break
    return hist[end:] if best >= nmin else []


def replay(prompt, out, cap):
    """steps, tokens, rows drafted: cap None is the oracle (drafts cut where the output leaves them)"""
    hist, i, steps, rows = list(prompt) + out[:1], 1, 0, 0
    while i < len(out):
        d = draft(hist)
        d = d[:cap] if cap is not None else d
        a = 0
        while a < len(d) and i + a < len(out) and d[a] == out[i + a]:
            a += 1
        steps += 1
        rows += a if cap is None else len(d)
        hist += out[i:i + a + 1]
        i += a + 1
    return steps, len(out) - 1, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-f", "--file", action="append", required=True, help="prompt file (repeatable)")
    ap.add_argument("-m", "--model", default=None, help="GGUF model (llmk's default)")
    ap.add_argument("-n", type=int, default=256, help="tokens generated (default 256)")
    ap.add_argument("-c", "--cost", default="0.2,0.3", help="per-row verify costs to report (default 0.2,0.3)")
    a = ap.parse_args()
    costs = [float(x) for x in a.cost.split(",")]
    print("| prompt | policy | steps | tok/step | " + " | ".join(f"bound c={c}" for c in costs) + " |")
    print("| --- | --- | --- | --- | " + " | ".join("---" for _ in costs) + " |")
    for path in a.file:
        prompt, out = token_streams(a.model, path, a.n)
        for cap in (None, 4, 8, 16):
            steps, toks, rows = replay(prompt, out, cap)
            bounds = " | ".join(f"{toks / (steps + c * rows):.2f}x" for c in costs)
            name = "oracle" if cap is None else f"fixed {cap}"
            print(f"| {os.path.basename(path)} | {name} | {steps} | {toks / steps:.2f} | {bounds} |")


if __name__ == "__main__":
    main()
