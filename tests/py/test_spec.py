"""Speculative decoding never changes the output (issue 21).

Every drafter, prompt, thread count and sampler gives exactly the tokens of
plain decoding: greedy and seeded sampling, prompts where drafts mostly hold
(copying a passage) and where they mostly fail (free text with forced long
drafts), prompt lookup and a draft model, llmk run, chat, batch and bench.
The statistical check of the accept/resample rule is in tests/test_spec.c.
"""
import json
import os
import re
import statistics
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLMK = os.environ.get("LLMK_BIN", os.path.join(ROOT, "build", "llmk"))
MODELS = os.environ.get("LLMK_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "llmk")
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPTS = os.path.join(ROOT, "bench", "prompts")
TINY = os.path.join(ROOT, "tests", "fixtures", "model", "tiny", "tiny_qwen2.gguf")

pytestmark = pytest.mark.skipif(not os.path.exists(SMOL), reason="default model not downloaded")


def llmk(*args, input=None, check=True, timeout=300):
    p = subprocess.run([LLMK, *args], capture_output=True, timeout=timeout, input=input)
    if check:
        assert p.returncode == 0, f"llmk {' '.join(args)} exited {p.returncode}: {p.stderr.decode()[-2000:]}"
    return p


def ids(*args):
    p = llmk("run", "-m", SMOL, "--print-ids", "--log-disable", *args)
    return json.loads(p.stdout)


def prompt(name):
    return ["-f", os.path.join(PROMPTS, name + ".txt")]


# (prompt, extra flags): copying (drafts hold), free text, and free text with
# 16 forced drafts from one matching token (drafts mostly rejected)
CASES = [
    ("copy_text", []),
    ("copy_code", []),
    ("free_story", []),
    ("free_story", ["--draft-fixed", "--draft-max", "16", "--spec-ngram-min", "1"]),
]


# One thread and two for every case; `make test` keeps one one-thread case,
# the one with the most rejections (and so the most roll-backs).
GREEDY = [pytest.param(threads, name, extra, id=f"{threads}-{case}",
                       marks=[pytest.mark.slow] if threads == "1" and case != "free_forced" else [])
          for threads in ("1", "2")
          for case, (name, extra) in zip(["copy_text", "copy_code", "free", "free_forced"], CASES)]


@pytest.mark.parametrize("threads,name,extra", GREEDY)
def test_greedy_ngram_identical(threads, name, extra):
    base = [*prompt(name), "-n", "64", "--temp", "0", "-t", threads]
    plain = ids(*base)
    spec = ids(*base, "--spec", "ngram", *extra)
    assert spec == plain
    assert len(plain) > 8


@pytest.mark.parametrize("seed", ["1", pytest.param("7", marks=pytest.mark.slow),
                                  pytest.param("42", marks=pytest.mark.slow)])
def test_sampling_identical_per_seed(seed):
    base = [*prompt("copy_text"), "-n", "48", "--temp", "0.8", "--seed", seed, "-t", "2"]
    plain = ids(*base)
    assert ids(*base, "--spec", "ngram") == plain
    assert ids(*base, "--spec", "ngram", "--draft-fixed", "--draft-max", "8", "--spec-ngram-min", "1") == plain
    # the same seed reproduces, a different one (almost surely) does not
    assert ids(*base, "--spec", "ngram") == plain


def test_sampling_with_penalties_identical():
    base = [*prompt("free_story"), "-n", "48", "--temp", "1.0", "--seed", "3", "--repeat-penalty", "1.3",
            "--top-k", "20", "-t", "2"]
    assert ids(*base, "--spec", "ngram", "--draft-fixed", "--spec-ngram-min", "1") == ids(*base)


@pytest.mark.slow
def test_reference_path_identical():
    base = [*prompt("copy_code"), "-n", "24", "--temp", "0", "-t", "2", "--path", "f32"]
    assert ids(*base, "--spec", "ngram") == ids(*base)


@pytest.fixture(scope="module")
def q8_target(tmp_path_factory):
    """A Q8_0 target requantized from the default model: the Q4_1 file drafts for it."""
    out = str(tmp_path_factory.mktemp("spec") / "smol_q8_0.gguf")
    llmk("quantize", "--allow-requantize", SMOL, out, "q8_0")
    return out


@pytest.mark.parametrize("name", [pytest.param("copy_text", marks=pytest.mark.slow), "free_explain"])
def test_draft_model_identical(q8_target, name):
    base = ["-m", q8_target, *prompt(name), "-n", "48", "--temp", "0", "-t", "2", "--print-ids", "--log-disable"]
    plain = json.loads(llmk("run", *base).stdout)
    p = llmk("run", *base[:-1], "-md", SMOL)
    assert json.loads(p.stdout) == plain
    assert "speculative draft:" in p.stderr.decode()
    sampled = [*base, "--temp", "0.7", "--seed", "11"]
    assert json.loads(llmk("run", *sampled, "--spec", "draft", "-md", SMOL).stdout) == \
        json.loads(llmk("run", *sampled).stdout)


def test_stats_line_reports_acceptance():
    # a fixed draft length makes the drafts, and so the figures, independent of timing
    args = ["run", "-m", SMOL, *prompt("copy_text"), "-n", "64", "--temp", "0", "-t", "2", "--spec", "ngram",
            "--draft-fixed", "--draft-max", "8"]
    lines = []
    for _ in range(2):
        err = llmk(*args).stderr.decode()
        line = [ln for ln in err.splitlines() if "speculative ngram:" in ln]
        assert line, err
        lines.append(line[0].split("speculative ngram: ")[1].split(" steps")[0])
    assert lines[0] == lines[1]
    # copying a passage: drafts hold often enough for well over a token per verify step
    acc, drafted = (int(x) for x in lines[0].split(" ")[0].split("/"))
    per_step = float(lines[0].split("), ")[1].split(" ")[0])
    assert drafted > 0 and acc > 0 and per_step > 1.3, lines[0]


def test_chat_identical():
    text = open(os.path.join(PROMPTS, "copy_text.txt")).read().replace("\n", " ")
    stdin = (text + "\n/exit\n").encode()
    base = ["chat", "-m", SMOL, "--temp", "0", "-t", "2", "-n", "64", "--log-disable"]
    plain = llmk(*base, input=stdin).stdout
    spec = llmk(*base, "--spec", "ngram", input=stdin).stdout
    assert spec == plain and len(plain) > 100


def test_batch_drafts_and_keeps_them(tmp_path):
    """llmk batch --spec ngram really drafts (the engine once fed its drafters no step times, so an adaptive
    drafter never did), keeps copied drafts, and changes no token."""
    content = open(os.path.join(PROMPTS, "copy_text.txt")).read()
    f = tmp_path / "req.jsonl"
    f.write_text(json.dumps({"messages": [{"role": "user", "content": content}], "max_tokens": 32,
                             "temperature": 0}) + "\n")
    base = ["batch", "-m", SMOL, "-f", str(f), "-t", "2"]
    plain = llmk(*base).stdout
    # fixed length: every decode step drafts; the reply copies the passage (the adaptive length's
    # timing in the engine: tests/test_spec.c)
    p = llmk(*base, "--spec", "ngram", "--draft-fixed", "--draft-max", "8")
    assert p.stdout == plain
    m = re.search(r"speculative ngram: (\d+)/(\d+) drafted tokens accepted", p.stderr.decode())
    assert m and int(m[2]) >= 8 and int(m[1]) > int(m[2]) // 4, p.stderr
    # a draft model (the model drafting for itself: every draft kept), shared by the requests
    f.write_text(f.read_text() * 2)
    plain = llmk(*base).stdout
    p = llmk(*base, "-md", SMOL, "--draft-fixed", "--draft-max", "4")
    assert p.stdout == plain
    m = re.search(r"speculative draft: (\d+)/(\d+) drafted tokens accepted", p.stderr.decode())
    assert m and int(m[2]) > 0 and m[1] == m[2], p.stderr


@pytest.mark.slow
def test_batch_identical(tmp_path):
    lines = []
    for i, name in enumerate(["copy_code", "copy_text", "free_story", "free_explain"] * 2):
        content = open(os.path.join(PROMPTS, name + ".txt")).read()
        lines.append(json.dumps({"id": i, "messages": [{"role": "user", "content": content}], "max_tokens": 40,
                                 "temperature": 0 if i < 4 else 0.9, "seed": i}))
    f = tmp_path / "req.jsonl"
    f.write_text("\n".join(lines) + "\n")
    base = ["batch", "-m", SMOL, "-f", str(f), "-t", "2", "-P", "3"]
    plain = llmk(*base).stdout
    spec = llmk(*base, "--spec", "ngram").stdout
    assert spec == plain
    # a pool so small that requests are preempted and recomputed mid-speculation
    p = llmk(*base, "--spec", "ngram", "--kv-blocks", "9")
    assert p.stdout == plain
    assert "speculative ngram:" in p.stderr.decode()


def test_bench_spec_reports(tmp_path):
    p = llmk("bench", "-m", SMOL, "--spec", "ngram", *prompt("copy_text"), *prompt("free_explain"), "-n", "32",
             "-r", "1", "-t", "2", "--json")
    rows = [json.loads(ln) for ln in p.stdout.decode().splitlines() if ln.strip()]
    assert len(rows) == 2
    for r in rows:
        assert r["identical"] is True and r["spec"] == "ngram"
        assert r["plain_ts"] > 0 and r["spec_ts"] > 0 and r["tokens_per_step"] >= 1
        assert 0 <= r["accept_rate"] <= 1 and r["n_gen"] > 0
        # one repetition: its own ratio (the figures are printed rounded)
        assert r["speedup"] == pytest.approx(r["spec_ts"] / r["plain_ts"], rel=1e-3)
        assert r["speedup_reps"] == [pytest.approx(r["speedup"], abs=1e-4)]
    # several: the median of each repetition's spec / plain (its runs back to back)
    for reps in (3, 4):
        p = llmk("bench", "-m", SMOL, "--spec", "ngram", *prompt("copy_text"), "-n", "16", "-r", str(reps), "-t", "2",
                 "--json")
        r = json.loads(p.stdout.decode())
        assert len(r["speedup_reps"]) == reps and min(r["speedup_reps"]) > 0
        assert r["speedup"] == pytest.approx(statistics.median(r["speedup_reps"]), abs=2e-4)


@pytest.mark.parametrize("args,msg", [
    (["--spec", "bogus"], "not a mode"),
    (["--spec", "draft"], "needs --model-draft"),
    (["--spec", "ngram", "-md", SMOL], "goes with --spec draft"),
    (["--spec", "ngram", "--draft-max", "0"], "--draft-max"),
    (["--spec", "ngram", "--draft-min", "9", "--draft-max", "4"], "exceeds"),
])
def test_bad_flags(args, msg):
    p = llmk("run", "-m", SMOL, "-p", "hi", "-n", "4", *args, check=False)
    assert p.returncode == 2, p.stderr
    assert msg in p.stderr.decode()


def test_draft_model_errors():
    p = llmk("run", "-m", SMOL, "-p", "hi", "-n", "4", "-md", "/nonexistent.gguf", check=False)
    assert p.returncode == 1 and "nonexistent" in p.stderr.decode()
    if os.path.exists(TINY):  # a different vocabulary
        p = llmk("run", "-m", SMOL, "-p", "hi", "-n", "4", "-md", TINY, check=False)
        assert p.returncode == 1 and "vocabulary" in p.stderr.decode(), p.stderr
    p = llmk("batch", "-m", SMOL, "-f", "-", "--spec", "draft", "-md", "/nonexistent.gguf",
             input=b'{"prompt": "hi", "max_tokens": 2}\n', check=False)
    assert p.returncode == 1 and "nonexistent" in p.stderr.decode(), p.stderr
    if os.path.exists(TINY):
        p = llmk("batch", "-m", SMOL, "-f", "-", "-md", TINY, input=b'{"prompt": "hi", "max_tokens": 2}\n',
                 check=False)
        assert p.returncode == 1 and "vocabulary" in p.stderr.decode(), p.stderr


@pytest.mark.slow
def test_serve_identical():
    """llmk serve --spec ngram: concurrent chat requests, greedy and seeded, get the tokens of a server
    without it (and greedy ones those of llmk run)."""
    import concurrent.futures

    from test_serve import Server, http_req

    texts = [open(os.path.join(PROMPTS, n + ".txt")).read() for n in ("copy_text", "copy_code", "free_story")]
    keys = [(i, temp) for i in range(len(texts)) for temp in (0, 0.8)]

    def answers(*flags, extra=None, metrics=False):
        s = Server("-np", 3, "-c", 1024, *flags)
        try:
            def one(key):
                i, temp = key
                body = {"messages": [{"role": "user", "content": texts[i]}], "max_tokens": 40,
                        "temperature": temp, "seed": 5, "return_token_ids": True, **(extra or {})}
                st, _, out = http_req(s, "POST", "/v1/chat/completions", body)
                assert st == 200, out
                return json.loads(out)["choices"][0]["token_ids"]

            with concurrent.futures.ThreadPoolExecutor(len(keys)) as ex:
                got = dict(zip(keys, ex.map(one, keys)))
            if metrics:  # drafts were made, counted and some kept
                _, _, m = http_req(s, "GET", "/metrics")
                drafted = int(re.search(rb"\nllmk_draft_tokens_total (\d+)", m)[1])
                kept = int(re.search(rb"\nllmk_draft_tokens_accepted_total (\d+)", m)[1])
                assert drafted > 0 and 0 < kept <= drafted, (drafted, kept)
            return got
        finally:
            assert s.stop() == 0, s.err()

    plain = answers()
    assert answers("--spec", "ngram", "--draft-max", "8", "--draft-fixed", metrics=True) == plain
    assert answers("-md", SMOL, "--draft-max", "4", metrics=True) == plain
    # llama-server's per-request fields: on for one request, off for another
    assert answers(extra={"speculative.n_max": 6, "speculative.n_min": 2}) == plain
    assert answers("--spec", "ngram", extra={"speculative.n_max": 0}) == plain
    for i, t in enumerate(texts):
        assert plain[(i, 0)] == ids("-p", t, "-n", "40", "--temp", "0", "-t", "2")
    s = Server("-np", 1, "-c", 512)
    try:
        for bad in ({"speculative.n_max": 65}, {"speculative.n_max": "8"},
                    {"speculative.n_max": 4, "speculative.n_min": 5}):
            st, _, out = http_req(s, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2, **bad})
            assert st == 400 and b"speculative" in out, (bad, st, out)
    finally:
        assert s.stop() == 0, s.err()


def test_plan_prints_the_runtime_figures():
    """The runtime's adaptive length and predicted speedup are llmk plan's for the same acceptance and costs."""
    err = llmk("run", "-m", SMOL, *prompt("copy_text"), "-n", "64", "--temp", "0", "-t", "2",
               "--spec", "ngram").stderr.decode()
    line = [ln for ln in err.splitlines() if "speculative ngram:" in ln][0]
    now = line.split("now: ")[1]
    acc = float(now.split("acceptance estimate ")[1].split(",")[0])
    dcost = float(now.split("draft cost ")[1].split(",")[0])
    rcost = float(now.split("row cost ")[1].split(" ")[0])
    length = int(now.split("draft length ")[1].split(",")[0])
    expected = float(now.split(", ")[3].split(" ")[0])
    speedup = float(now.split("predicted speedup ")[1].split("x")[0])
    if length == 0:
        pytest.skip(f"the run ended with drafting off: {line}")
    p = llmk("plan", "--ctx", "512", "--accept-rate", str(acc), "--draft-depth", str(length), "--draft-cost",
             str(dcost), "--row-cost", str(rcost), "--json")
    plan = json.loads(p.stdout)
    # the runtime printed its inputs to 3 decimals: the figures agree to about that
    assert plan["best_draft_depth"] == pytest.approx(length, abs=1)
    assert plan["expected_tokens_per_step"] == pytest.approx(expected, rel=2e-2)
    assert plan["speculative_speedup"] == pytest.approx(speedup, rel=2e-2)
