"""`llmk perplexity`: PPL over a fixed text, the saved log-prob file checked
against an independent evaluation (`llmk logits` + numpy), KL-divergence of the
default model against itself (exactly 0) and of its re-quantizations (Q8_0,
Q6_K, Q4_K_M) against it, and every kind of bad input.

Small scale to stay fast: --ctx 64, 2 windows, -t 2 (62 scored positions).
The full-size figures are in docs/quality.md."""
import math
import os
import re
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
SAN_BIN = os.environ.get("LLMK_SAN_BIN")
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = ROOT / "tests" / "fixtures" / "text" / "lighthouse.txt"
CTX, CHUNKS = 64, 2
FIRST = CTX // 2
PER = CTX - 1 - FIRST  # scored positions per window
SMALL = ["--ctx", str(CTX), "--chunks", str(CHUNKS), "-t", "2"]

needs_model = pytest.mark.skipif(not MODEL.exists(), reason=f"default model {MODEL} not present")


def run(*args, binary=BIN, timeout=600):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def pp(*args, binary=BIN):
    return run("perplexity", *args, binary=binary)


NUM = r"([-+0-9.eEinfa]+)"


def parse(out):
    """The figures `llmk perplexity` prints, as floats."""
    res = {}
    pats = {
        "ppl": rf"^PPL = {NUM} \+/- {NUM}$",
        "nll": rf"^mean NLL = {NUM} \+/- {NUM}$",
        "base_ppl": rf"^base PPL = {NUM} \+/- {NUM} ",
        "dln": rf"^ln\(PPL/base PPL\) = {NUM} \+/- {NUM}$",
        "kl": rf"^KL-divergence mean = {NUM} \+/- {NUM}$",
    }
    for k, p in pats.items():
        m = re.search(p, out, re.M)
        if m:
            res[k], res[k + "_se"] = float(m.group(1)), float(m.group(2))
    m = re.search(rf"^KL-divergence median = {NUM}, p99 = {NUM}, max = {NUM}$", out, re.M)
    if m:
        res["kl_median"], res["kl_p99"], res["kl_max"] = map(float, m.groups())
    m = re.search(r"^top-1 agreement = ([0-9.]+)% \+/- [0-9.na]+% \((\d+) of (\d+)\)$", out, re.M)
    if m:
        res["top1"], res["agree"], res["n"] = float(m.group(1)), int(m.group(2)), int(m.group(3))
    m = re.search(r"^windows:  (\d+) of (\d+) tokens .* (\d+) per window, (\d+) in all$", out, re.M)
    if m:
        res["windows"], res["ctx"], res["per"], res["scored"] = map(int, m.groups())
    res["running"] = [float(x) for x in re.findall(r"\[\d+\] ([0-9.]+)", out)]
    return res


def read_logp(path):
    """The --save-logits file: header, ids, log-prob rows (docs/quality.md)."""
    b = Path(path).read_bytes()
    magic, ver, V, ctx, chunks, first, npos = struct.unpack_from("<8s6I", b, 0)
    assert magic == b"LLMKLOGP" and ver == 1
    ids = np.frombuffer(b, "<i4", chunks * ctx, 32).reshape(chunks, ctx)
    lp = np.frombuffer(b, "<f4", npos * V, 32 + 4 * chunks * ctx).reshape(npos, V)
    assert len(b) == 32 + 4 * chunks * ctx + 4 * npos * V
    return dict(V=V, ctx=ctx, chunks=chunks, first=first, npos=npos, ids=ids, lp=lp)


def write_header(path, V, ctx, chunks, first, npos, magic=b"LLMKLOGP", ver=1, body=None):
    hdr = struct.pack("<8s6I", magic, ver, V, ctx, chunks, first, npos)
    if body is None:
        body = bytes(4 * chunks * ctx + 4 * npos * V)
    Path(path).write_bytes(hdr + body)


def fails(r, status, *words):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"error: {status}" in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


# ---- the base run and the re-quantized runs (shared, computed once) ---------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    if not MODEL.exists():
        pytest.skip(f"default model {MODEL} not present")
    d = tmp_path_factory.mktemp("ppl")
    f = d / "base.logp"
    r = pp("-m", MODEL, "-f", TEXT, *SMALL, "--save-logits", f)
    assert r.returncode == 0, r.stderr
    return dict(out=parse(r.stdout), file=f, dir=d)


def requantized(base, q):
    """The default model re-quantized to q, its perplexity and KL against the base run."""
    g = base["dir"] / f"{q}.gguf"
    r = run("quantize", MODEL, g, q, "--allow-requantize")
    assert r.returncode == 0, r.stderr
    save = ["--save-logits", base["dir"] / "q8_0.logp"] if q == "q8_0" else []
    r = pp("-m", g, "-f", TEXT, "-t", "2", "--kl-base", base["file"], *save)
    assert r.returncode == 0, r.stderr
    return parse(r.stdout)


@pytest.fixture(scope="module")
def q8_run(base):
    return requantized(base, "q8_0")


@pytest.fixture(scope="module")
def quants(base, q8_run):  # the slow test's: two K-quant runs more
    return {"q8_0": q8_run, **{q: requantized(base, q) for q in ("q6_k", "q4_k_m")}}


@needs_model
def test_base_ppl(base):
    o = base["out"]
    assert (o["windows"], o["ctx"], o["per"], o["scored"]) == (CHUNKS, CTX, PER, CHUNKS * PER)
    assert math.isfinite(o["ppl"]) and 1 < o["ppl"] < 1000
    assert o["ppl_se"] > 0
    # PPL is exp(mean NLL); its error is PPL x the NLL's standard error
    assert o["ppl"] == pytest.approx(math.exp(o["nll"]), rel=1e-4)
    assert o["ppl_se"] == pytest.approx(o["ppl"] * o["nll_se"], rel=1e-3)
    assert len(o["running"]) == CHUNKS and o["running"][-1] == pytest.approx(o["ppl"], rel=1e-4)


@needs_model
def test_saved_file_is_what_an_independent_evaluation_gives(base):
    f = read_logp(base["file"])
    assert (f["ctx"], f["chunks"], f["first"], f["npos"]) == (CTX, CHUNKS, FIRST, CHUNKS * PER)
    assert f["V"] == 49152
    # the ids are the text's tokens, cut into consecutive windows (no BOS for SmolLM2)
    r = run("tokenize", "-m", MODEL, "-f", TEXT)
    assert r.returncode == 0, r.stderr
    toks = [int(x) for x in r.stdout.strip().strip("[]").split(",")]
    assert f["ids"].ravel().tolist() == toks[:CHUNKS * CTX]
    # every row is a normalised log-distribution
    assert np.allclose(np.exp(f["lp"].astype(np.float64)).sum(1), 1, atol=1e-4)
    # PPL recomputed from the file's rows and targets
    tgt = f["ids"][:, FIRST + 1:].ravel()
    nll = -f["lp"][np.arange(f["npos"]), tgt].astype(np.float64)
    assert math.exp(nll.mean()) == pytest.approx(base["out"]["ppl"], rel=1e-4)
    se = nll.std(ddof=1) / math.sqrt(len(nll))
    assert se == pytest.approx(base["out"]["nll_se"], rel=1e-4)
    # The second window from a fresh session (llmk logits), scored at positions
    # FIRST..CTX-2: equal to the saved rows only if perplexity emptied the
    # session between windows and saved exactly those positions.
    w = f["ids"][1]
    r = subprocess.run([BIN, "logits", "-m", str(MODEL), "-t", "2", "--ids",
                        ",".join(map(str, w))], capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr
    logits = np.frombuffer(r.stdout, "<f4").reshape(CTX, f["V"])[FIRST:CTX - 1].astype(np.float64)
    mx = logits.max(1, keepdims=True)
    ref = logits - mx - np.log(np.exp(logits - mx).sum(1, keepdims=True))
    got = f["lp"][PER:].astype(np.float64)
    assert np.abs(got - ref).max() < 1e-4 * max(1.0, np.abs(ref).max())
    # the scored tokens are the next ids
    assert (got.argmax(1) == ref.argmax(1)).all()


@needs_model
def test_kl_of_the_base_against_itself_is_exactly_zero(base):
    r = pp("-m", MODEL, "-f", TEXT, "-t", "2", "--kl-base", base["file"])
    assert r.returncode == 0, r.stderr
    o = parse(r.stdout)
    # ctx and windows come from the base file
    assert (o["windows"], o["ctx"], o["scored"]) == (CHUNKS, CTX, CHUNKS * PER)
    assert o["ppl"] == base["out"]["ppl"] and o["base_ppl"] == o["ppl"]
    assert o["kl"] == 0 and o["kl_se"] == 0 and o["kl_max"] == 0
    assert o["dln"] == 0
    assert (o["agree"], o["n"], o["top1"]) == (CHUNKS * PER, CHUNKS * PER, 100.0)


@pytest.mark.slow
@needs_model
def test_requantized_models_run_and_order_as_expected(base, quants):
    # Seen at this scale (62 positions, base Q4_1): KL q8_0 0.0054, q6_k 0.0117,
    # q4_k_m 0.087; top-1 97%, 90%, 81%; ln(PPL ratio) +0.018, +0.012, +0.064.
    for q, o in quants.items():
        assert math.isfinite(o["ppl"]) and o["ppl"] > 1, q
        assert o["base_ppl"] == base["out"]["ppl"], q
        assert o["n"] == CHUNKS * PER, q
        assert 0 < o["kl"] < 1 and o["kl_max"] >= o["kl_p99"] >= o["kl_median"] >= 0, q
        # the paired ln(PPL ratio) agrees with the two PPLs
        assert o["dln"] == pytest.approx(math.log(o["ppl"] / o["base_ppl"]), abs=2e-4), q
    q8, q6, q4 = quants["q8_0"], quants["q6_k"], quants["q4_k_m"]
    # Q8_0 ~ base: re-quantizing Q4_1 weights to 8 bits loses almost nothing
    assert abs(q8["dln"]) < 0.05 and q8["kl"] < 0.02 and q8["top1"] >= 90
    # more bits, less divergence: q8_0 < q6_k (mostly q8_0, ffn_down q6_k) < q4_k_m
    assert 3 * q8["kl"] < q4["kl"]
    assert q8["kl"] < q6["kl"] < q4["kl"] / 2
    assert q8["top1"] >= q4["top1"]


# ---- bad inputs ----------------------------------------------------------------

def test_usage_errors():
    assert pp("-h").returncode == 0 and "--kl-base" in pp("-h").stdout
    for args in (["--ctx", "64"],                      # no -f
                 ["-f", TEXT, "--ctx", "3"],           # window too small
                 ["-f", TEXT, "--ctx", "x"],
                 ["-f", TEXT, "--chunks", "0"],
                 ["-f", TEXT, "--path", "gpu"],
                 ["-f", TEXT, "--bogus", "1"],
                 ["-f"]):
        r = pp(*args)
        assert r.returncode == 2, (args, r.stderr)
        assert "llmk perplexity:" in r.stderr


@needs_model
def test_bad_text(tmp_path):
    fails(pp("-m", MODEL, "-f", tmp_path / "absent.txt"), "llmk_io_error", "absent.txt")
    short = tmp_path / "short.txt"
    short.write_text("Too short for a window.")
    fails(pp("-m", MODEL, "-f", short, "--ctx", 64), "llmk_bad_request", "fewer than one window")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    fails(pp("-m", MODEL, "-f", empty, "--ctx", 4), "llmk_bad_request", "0 tokens")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"valid start \xff\xfe not utf-8" * 20)
    fails(pp("-m", MODEL, "-f", bad, "--ctx", 4), "llmk_invalid_utf8")
    fails(pp("-m", tmp_path / "absent.gguf", "-f", TEXT), "llmk_not_found", "absent.gguf")


@needs_model
def test_corrupt_base_headers(tmp_path):
    f = tmp_path / "b.logp"

    def check(status, *words):
        fails(pp("-m", MODEL, "-f", TEXT, "--kl-base", f), status, *words)

    fails(pp("-m", MODEL, "-f", TEXT, "--kl-base", tmp_path / "absent"), "llmk_io_error", "absent")
    f.write_bytes(b"LLMKLOGP\x01\x00")
    check("llmk_truncated_file", "header")
    write_header(f, 1000, 64, 1, 32, 31, magic=b"GGUF\x03\x00\x00\x00")
    check("llmk_bad_magic")
    write_header(f, 1000, 64, 1, 32, 31, ver=2)
    check("llmk_bad_version")
    write_header(f, 1000, 64, 1, 31, 31)  # first is not ctx/2
    check("llmk_bad_request", "inconsistent header")
    write_header(f, 1000, 64, 2, 32, 31)  # positions do not match the windows
    check("llmk_bad_request", "inconsistent header")
    write_header(f, 0, 64, 1, 32, 31)
    check("llmk_bad_request", "inconsistent header")
    # sizes that overflow 64 bits
    write_header(f, 0xFFFFFFFF, 4, 0xFFFFFFFF, 2, 0xFFFFFFFF, body=b"")
    check("llmk_count_too_large")
    write_header(f, 1000, 64, 1, 32, 31, body=bytes(100))
    check("llmk_truncated_file", "implies")
    write_header(f, 1000, 64, 1, 32, 31, body=bytes(4 * 64 + 4 * 31 * 1000 + 1))
    check("llmk_bad_request", "trailing")
    # consistent, but another vocabulary
    write_header(f, 1000, 64, 1, 32, 31)
    check("llmk_bad_request", "vocabulary of 1000")
    # a directory is not a base file
    fails(pp("-m", MODEL, "-f", TEXT, "--kl-base", tmp_path), "llmk_io_error")


@needs_model
def test_base_from_another_run(base, tmp_path):
    b = base["file"]
    fails(pp("-m", MODEL, "-f", TEXT, "--ctx", 128, "--kl-base", b), "llmk_bad_request", "--ctx 64")
    fails(pp("-m", MODEL, "-f", TEXT, "--chunks", 3, "--kl-base", b), "llmk_bad_request", "holds 2 windows")
    other = tmp_path / "other.txt"
    other.write_text(TEXT.read_text().split("\n\n", 1)[1])  # the same essay without its title
    fails(pp("-m", MODEL, "-f", other, "--kl-base", b), "llmk_bad_request", "other tokens")
    short = tmp_path / "short.txt"
    short.write_text(TEXT.read_text()[:300])
    fails(pp("-m", MODEL, "-f", short, "--kl-base", b), "llmk_bad_request", "another text")
    # the output may not overwrite the base it is reading
    size = b.stat().st_size
    fails(pp("-m", MODEL, "-f", TEXT, "--kl-base", b, "--save-logits", b), "llmk_output_is_input")
    assert b.stat().st_size == size
    fails(pp("-m", MODEL, "-f", TEXT, *SMALL, "--save-logits", tmp_path / "no" / "dir" / "x"),
          "llmk_io_error", "cannot create")


@needs_model
def test_non_finite_base_values_stop_the_run_and_leave_no_output(base, tmp_path):
    raw = bytearray(base["file"].read_bytes())
    V = struct.unpack_from("<I", raw, 12)[0]
    off = 32 + 4 * CHUNKS * CTX + 4 * (3 * V + 7)  # row 3, id 7
    raw[off:off + 4] = struct.pack("<f", float("nan"))
    f = tmp_path / "nan.logp"
    f.write_bytes(bytes(raw))
    out = tmp_path / "out.logp"
    fails(pp("-m", MODEL, "-f", TEXT, "-t", "2", "--chunks", 1, "--kl-base", f, "--save-logits", out),
          "llmk_bad_request", "id 7 at scored position 3")
    assert not out.exists()


@needs_model
@pytest.mark.skipif(not SAN_BIN or not Path(SAN_BIN).exists(), reason="no sanitizer build")
def test_sanitizer_build(tmp_path):
    f = tmp_path / "s.logp"
    r = pp("-m", MODEL, "-f", TEXT, "--ctx", 8, "--chunks", 2, "-t", 2, "--save-logits", f, binary=SAN_BIN)
    assert r.returncode == 0, r.stderr
    r = pp("-m", MODEL, "-f", TEXT, "-t", 2, "--kl-base", f, binary=SAN_BIN)
    assert r.returncode == 0, r.stderr
    assert parse(r.stdout)["kl"] == 0
    write_header(f, 0xFFFFFFFF, 4, 0xFFFFFFFF, 2, 0xFFFFFFFF, body=b"")
    assert pp("-m", MODEL, "-f", TEXT, "--kl-base", f, binary=SAN_BIN).returncode == 1
    f.write_bytes(b"LLMKLOGP")
    assert pp("-m", MODEL, "-f", TEXT, "--kl-base", f, binary=SAN_BIN).returncode == 1


@needs_model
def test_kl_figures_match_a_numpy_computation(base, q8_run):
    """Every figure of the Q8_0 run recomputed from the two saved files:
    KL(base||this) = sum_i p_base(i) (log p_base(i) - log p_this(i)) per
    position (the direction matters: KL(this||base) differs in the 3rd digit)."""
    b = read_logp(base["file"])
    t = read_logp(base["dir"] / "q8_0.logp")
    assert (t["ids"] == b["ids"]).all()
    lb, lt = b["lp"].astype(np.float64), t["lp"].astype(np.float64)
    kl = (np.exp(lb) * (lb - lt)).sum(1)
    o = q8_run
    n = len(kl)
    assert o["n"] == n
    assert o["kl"] == pytest.approx(kl.mean(), rel=1e-5)
    assert o["kl_se"] == pytest.approx(kl.std(ddof=1) / math.sqrt(n), rel=1e-4)
    ks = np.sort(kl)
    assert o["kl_median"] == pytest.approx(ks[math.ceil(0.5 * n) - 1], rel=1e-5)
    assert o["kl_p99"] == pytest.approx(ks[math.ceil(0.99 * n) - 1], rel=1e-5)
    assert o["kl_max"] == pytest.approx(ks[-1], rel=1e-5)
    reverse = (np.exp(lt) * (lt - lb)).sum(1).mean()
    assert abs(reverse - kl.mean()) > 1e-4 * kl.mean()  # the check above can tell them apart
    agree = int((lb.argmax(1) == lt.argmax(1)).sum())
    assert o["agree"] == agree
    tgt = b["ids"][:, FIRST + 1:].ravel()
    d = (lb[np.arange(n), tgt] - lt[np.arange(n), tgt])  # nll_this - nll_base
    assert o["dln"] == pytest.approx(d.mean(), rel=1e-4, abs=1e-7)
    assert o["dln_se"] == pytest.approx(d.std(ddof=1) / math.sqrt(n), rel=1e-4)
