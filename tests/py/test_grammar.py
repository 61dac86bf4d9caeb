"""GBNF grammars end to end: llmk run, chat, batch and serve under several
grammars (greedy and seeded sampling); every output is checked by a small
recursive GBNF matcher written here, independently of the C code
(src/grammar*.c), and malformed grammars are refused naming line:column."""
import json
import os
import re
import subprocess
import time
import urllib.request
import urllib.error
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")

# ---- an independent GBNF matcher ------------------------------------------------------------

TOKEN = re.compile(r'\s+|#[^\n]*|::=|[A-Za-z0-9_-]+|"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|\{[0-9, ]+\}|[().|*+?]',
                   re.S)


def unescape(s):
    out, i = [], 0
    simple = {"n": "\n", "r": "\r", "t": "\t", "0": "\0"}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e in "xuU":
            k = {"x": 2, "u": 4, "U": 8}[e]
            out.append(chr(int(s[i + 2:i + 2 + k], 16)))
            i += 2 + k
        else:
            out.append(simple.get(e, e))
            i += 2
    return out


class Gbnf:
    """Rules as trees: ('seq', [..]), ('alt', [..]), ('lit', str), ('cls', neg, ranges), ('ref', name),
    ('rep', node, lo, hi or None). match() answers (complete, viable prefix) by exploring every parse."""

    def __init__(self, text):
        toks = [t for t in TOKEN.findall(text) if not t.isspace() and not t.startswith("#")]
        self.rules, self.toks, self.i = {}, toks, 0
        while self.i < len(toks):
            name = toks[self.i]
            assert toks[self.i + 1] == "::=", toks[self.i:self.i + 2]
            self.i += 2
            self.rules[name] = self.alts()

    def at_rule(self):
        return self.i + 1 < len(self.toks) and self.toks[self.i + 1] == "::="

    def alts(self):
        out = [self.seq()]
        while self.i < len(self.toks) and self.toks[self.i] == "|":
            self.i += 1
            out.append(self.seq())
        return ("alt", out)

    def seq(self):
        items = []
        while self.i < len(self.toks) and self.toks[self.i] not in "|)" and not self.at_rule():
            t = self.toks[self.i]
            self.i += 1
            if t == "(":
                node = self.alts()
                assert self.toks[self.i] == ")"
                self.i += 1
            elif t.startswith('"'):
                node = ("lit", "".join(unescape(t[1:-1])))
            elif t.startswith("["):
                body = t[1:-1]
                neg = body.startswith("^")
                chars = unescape(body[1:] if neg else body)
                ranges, k = [], 0
                while k < len(chars):
                    if k + 2 < len(chars) and chars[k + 1] == "-":
                        ranges.append((chars[k], chars[k + 2]))
                        k += 3
                    else:
                        ranges.append((chars[k], chars[k]))
                        k += 1
                node = ("cls", neg, ranges)
            elif t == ".":
                node = ("cls", True, [])
            else:
                node = ("ref", t)
            while self.i < len(self.toks) and (self.toks[self.i] in "*+?" or self.toks[self.i].startswith("{")):
                r = self.toks[self.i]
                self.i += 1
                if r in "*+?":
                    lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[r]
                else:
                    parts = r[1:-1].replace(" ", "").split(",")
                    lo = int(parts[0])
                    hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
                node = ("rep", node, lo, hi)
            items.append(node)
        return ("seq", items)

    def match(self, s):
        self._s = s
        self._memo = {}
        self._viable = False
        ends = self._m(self.rules["root"], 0, 0)
        return len(s) in ends, self._viable or len(s) in ends

    def _m(self, node, i, depth):
        """Set of end positions; records viability when the input runs out inside node."""
        s = self._s
        key = (id(node), i)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = set()  # grammars here are not left recursive
        kind = node[0]
        if kind == "lit":
            lit = node[1]
            rest = s[i:i + len(lit)]
            if rest == lit:
                res = {i + len(lit)}
            else:
                res = set()
                if lit.startswith(rest) and i + len(rest) == len(s):
                    self._viable = True
        elif kind == "cls":
            if i >= len(s):
                self._viable = True
                res = set()
            else:
                c = s[i]
                hit = any(a <= c <= b for a, b in node[2])
                res = {i + 1} if hit != node[1] else set()
        elif kind == "ref":
            res = self._m(self.rules[node[1]], i, depth + 1)
        elif kind == "alt":
            res = set()
            for a in node[1]:
                res |= self._m(a, i, depth + 1)
        elif kind == "seq":
            cur = {i}
            for item in node[1]:
                nxt = set()
                for p in cur:
                    nxt |= self._m(item, p, depth + 1)
                cur = nxt
            res = cur
        else:  # rep
            _, sub, lo, hi = node
            res, cur, k = set(), {i}, 0
            seen = set()
            while cur and (hi is None or k <= hi):
                if k >= lo:
                    res |= cur
                if hi is not None and k == hi:
                    break
                nxt = set()
                for p in cur:
                    nxt |= {q for q in self._m(sub, p, depth + 1) if q > p or k < lo}
                cur = nxt - seen if k >= lo else nxt
                seen |= cur
                k += 1
        self._memo[key] = res
        return res


def test_matcher_itself():
    g = Gbnf('root ::= ("yes" | "no") "."')
    assert g.match("yes.") == (True, True) and g.match("ye") == (False, True) and g.match("No.")[1] is False
    g = Gbnf('root ::= "[" [0-9]{1,3} ("," [0-9]{1,3}){0,4} "]"')
    assert g.match("[1,22,333]")[0] and not g.match("[1234]")[1] and g.match("[1,")[1]
    g = Gbnf('root ::= [^"a]+ "."')
    assert g.match("xy.")[0] and not g.match("a.")[1]


YES_NO = 'root ::= ("yes" | "no") "."'
NUMBERS = 'root ::= "[" [0-9]{1,3} (", " [0-9]{1,3}){0,4} "]"'
JSONISH = ('root ::= "{" pair (", " pair){0,2} "}"\npair ::= "\\"" [a-z]{1,6} "\\": " val\n'
           'val ::= [0-9]{1,4} | "\\"" [a-z ]{0,8} "\\"" | "{\\"k\\": " [0-9]{1,2} "}"')
UTF8 = 'root ::= [а-яё]{1,6} " " ("日本" | "中文" | "é") "!"'
GRAMMARS = {"yes_no": YES_NO, "numbers": NUMBERS, "jsonish": JSONISH, "utf8": UTF8}


def check_text(grammar, text, complete=True):
    whole, viable = Gbnf(grammar).match(text)
    assert viable, (grammar, text)
    if complete:
        assert whole, (grammar, text)


def run(*args, input_bytes=None, check=True):
    p = subprocess.run([BIN, *map(str, args)], input=input_bytes, capture_output=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    return p


@pytest.mark.parametrize("name", sorted(GRAMMARS))
@pytest.mark.parametrize("mode", ["greedy", "seed"])
def test_run_obeys_grammar(name, mode):
    g = GRAMMARS[name]
    samp = ["--temp", "0"] if mode == "greedy" else ["--temp", "1.5", "--seed", "7", "--top-k", "0", "--min-p", "0"]
    p = run("run", "-m", MODEL, "-p", "Answer:", "--no-display-prompt", "--grammar", g, "-n", "80", *samp)
    text = p.stdout.decode("utf-8")
    assert text.endswith("\n")
    check_text(g, text[:-1])


def test_run_grammar_file_and_chat_mode(tmp_path):
    f = tmp_path / "g.gbnf"
    f.write_text("# a list of numbers\n" + NUMBERS + "\n")
    p = run("run", "-m", MODEL, "-p", "Give numbers", "--chat", "--grammar-file", f, "-n", "60", "--temp", "0")
    check_text(NUMBERS, p.stdout.decode()[:-1])


def test_chat_applies_mask_every_turn():
    """Each reply of a sampled chat is "yes." or "no." - never e.g. "No." (the first token after the
    template, every later token and the end all go through the mask)."""
    questions = b"Is the sky blue?\nIs fire cold?\nDo fish swim?\nIs snow hot?\n"
    for seed in (1, 2, 3):
        p = run("chat", "-m", MODEL, "--grammar", YES_NO, "--temp", "1.5", "--top-k", "0", "--min-p", "0",
                "--seed", seed, "-n", "20", input_bytes=questions)
        replies = p.stdout.decode().split("\n")[:-1]
        assert len(replies) == 4, p.stdout
        for r in replies:
            check_text(YES_NO, r)


SPEC = ["--spec", "ngram", "--draft-fixed", "--draft-max", "8", "--spec-ngram-min", "1"]


@pytest.mark.parametrize("name", ["numbers", "jsonish"])
def test_speculation_under_a_grammar_changes_nothing(name):
    """Drafts are not constrained, but every row is chosen under the mask from the state the tokens before
    it left, so a draft the grammar refuses is simply rejected: the tokens are the grammar's alone (run,
    greedy and seeded; drafts forced at every step)."""
    g = GRAMMARS[name]
    for samp in (["--temp", "0"], ["--temp", "1.2", "--seed", "5", "--top-k", "0", "--min-p", "0"]):
        base = ["run", "-m", MODEL, "-p", 'Numbers: [12, 12, 12] {"ab": 12, "ab": 12}', "--grammar", g,
                "-n", "60", "--print-ids", *samp]
        plain = run(*base).stdout
        p = run(*base, *SPEC)
        assert p.stdout == plain
        m = re.search(rb"speculative ngram: (\d+)/(\d+) drafted", p.stderr)
        assert m and int(m[2]) > 0, p.stderr


def test_chat_and_batch_speculate_under_grammars(tmp_path):
    questions = b"Is the sky blue?\nIs fire cold?\n"
    base = ["chat", "-m", MODEL, "--grammar", YES_NO, "--temp", "1.5", "--top-k", "0", "--min-p", "0",
            "--seed", "2", "-n", "20"]
    assert run(*base, *SPEC, input_bytes=questions).stdout == run(*base, input_bytes=questions).stdout
    lines = [{"prompt": "[1, 2, 1, 2, 1, 2", "grammar": NUMBERS, "max_tokens": 40},
             {"messages": [{"role": "user", "content": "Go"}], "grammar": JSONISH, "max_tokens": 60,
              "temperature": 1.1, "seed": 3},
             {"prompt": "Hello", "max_tokens": 8}]
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    plain = run("batch", "-m", MODEL, "-f", f, "--temp", "0").stdout
    assert run("batch", "-m", MODEL, "-f", f, "--temp", "0", *SPEC).stdout == plain


def test_batch_mixes_grammars(tmp_path):
    lines = []
    for k, (name, g) in enumerate(sorted(GRAMMARS.items())):
        lines.append({"id": name, "prompt": "Reply:", "grammar": g, "max_tokens": 80})
        lines.append({"id": name + "-s", "messages": [{"role": "user", "content": "Go"}], "grammar": g,
                      "max_tokens": 80, "temperature": 1.3, "seed": 11 + k})
    lines.append({"id": "free", "prompt": "Hello", "max_tokens": 8})
    f = tmp_path / "in.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    p = run("batch", "-m", MODEL, "-f", f, "--temp", "0", "-P", "4")
    out = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert len(out) == len(lines)
    for o, line in zip(out, lines):
        if "grammar" in line:
            assert o["finish_reason"] == "stop", o
            check_text(line["grammar"], o["text"])


def test_refusals(tmp_path):
    p = run("run", "-m", MODEL, "-p", "x", "--grammar", 'root ::= "a"\n  | ( "b"', check=False)
    assert p.returncode != 0 and b"line 2, column 5" in p.stderr and b"never closed" in p.stderr
    p = run("run", "-m", MODEL, "-p", "x", "--grammar", "root ::= item+\nitem ::= thing", check=False)
    assert p.returncode != 0 and b"line 2, column 10: undefined rule 'thing'" in p.stderr
    p = run("run", "-m", MODEL, "-p", "x", "--grammar", "expr ::= expr \"+\" | \"1\"\nroot ::= expr", check=False)
    assert p.returncode != 0 and b"line 1, column 1" in p.stderr and b"can reach itself" in p.stderr
    p = run("run", "-m", MODEL, "-p", "x", "--grammar-file", tmp_path / "missing.gbnf", check=False)
    assert p.returncode != 0 and b"missing.gbnf" in p.stderr
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps({"prompt": "x", "grammar": "root ::= [z-a]"}) + "\n")
    p = run("batch", "-m", MODEL, "-f", f, check=False)
    assert p.returncode != 0 and b"line 1, column 12" in p.stderr


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_serve_grammar():
    srv = subprocess.Popen([BIN, "serve", "-m", str(MODEL), "--port", "0", "-c", "2048"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        m = re.match(r"llmk serve: listening on http://127\.0\.0\.1:(\d+)$", srv.stderr.readline().strip())
        assert m
        port = int(m.group(1))
        deadline = time.time() + 120
        while True:  # /health answers 200 once the model is loaded
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
                    if r.status == 200:
                        break
            except urllib.error.HTTPError:
                pass
            assert time.time() < deadline and srv.poll() is None
            time.sleep(0.1)
        for name, g in sorted(GRAMMARS.items()):
            st, r = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Answer"}],
                                                        "grammar": g, "max_tokens": 80, "temperature": 1.2,
                                                        "seed": 5})
            assert st == 200, r
            assert r["choices"][0]["finish_reason"] == "stop"
            check_text(g, r["choices"][0]["message"]["content"])
            st, r = post(port, "/v1/completions", {"prompt": "Answer:", "grammar": g, "max_tokens": 80,
                                                   "temperature": 0})
            assert st == 200, r
            check_text(g, r["choices"][0]["text"])
            # speculation on for this request: the same text
            st, rs = post(port, "/v1/completions", {"prompt": "Answer:", "grammar": g, "max_tokens": 80,
                                                    "temperature": 0, "speculative.n_max": 8})
            assert st == 200 and rs["choices"][0]["text"] == r["choices"][0]["text"], rs
        st, r = post(port, "/v1/completions", {"prompt": "x", "grammar": "root ::= \"a\" |\n  [b-"})
        assert st == 400 and "line 2, column 3" in r["error"]["message"], r
        assert r["error"]["param"] == "grammar"
        st, r = post(port, "/v1/completions", {"prompt": "x", "grammar": 5})
        assert st == 400
    finally:
        srv.terminate()
        srv.wait(timeout=60)
