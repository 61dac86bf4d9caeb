"""gpt-oss against transformers: tokenizer, harmony chat template, logits.

Fixtures: tests/fixtures/model/tiny/tiny_gptoss.gguf (and
tiny_gptoss_mxfp4.gguf, its experts in MXFP4 by llama-quantize
MXFP4_MOE), a random GptOssForCausalLM (4 layers alternating sliding window
8 / full, YaRN rope, attention sinks, biases, 8 experts top-2 with the
clamped SwiGLU) with an o200k-regex byte-level BPE and the harmony special
tokens, converted by llama.cpp's convert_hf_to_gguf.py
(tests/ref/model_gptoss.py; docs/testing.md). The reference logits are
transformers' float64 pass rounded to f32.

- Tokenizer (needs only the file's tokenizer, so it runs whatever the decode
  paths support): `llmk tokenize` gives transformers' ids for every text of
  the tokenizer corpus plus harmony texts (tokenizer.ggml.pre "gpt-4o");
  pieces; `llmk detokenize` gives transformers' decode.
- Chat template: the file's template is recognised as harmony and renders
  the jinja2 fixture (tests/fixtures/chat/gptoss.json, dated
  FIXED_DATE) with today's date in place of the fixture's; the refusals.
- Model: logits within the tiny fixtures' tolerances on the ref and f32
  paths and 3e-3 on the fast path, greedy identical, the MXFP4 file's
  paths against each other, and each feature needed: the sliding window,
  the YaRN scaling, the sinks, the router bias, the expert biases.
"""
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import pytest

from test_model_fixtures import LLMK, THREADS, TINY, check_greedy, check_logits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(TINY, "tiny_gptoss.json"), encoding="utf-8") as f:
    DOC = json.load(f)
with open(os.path.join(ROOT, "tests", "fixtures", "chat", "gptoss.json"), encoding="utf-8") as f:
    CHAT = json.load(f)
F32 = os.path.join(TINY, "tiny_gptoss.gguf")
MX = os.path.join(TINY, "tiny_gptoss_mxfp4.gguf")
V = DOC["n_vocab"]
SEQS = DOC["sequences"]
CASES = DOC["tokenize"]
SP = DOC["special_ids"]


def run(*args, check=True):
    p = subprocess.run([LLMK, *args], capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    return p


def tokenize_file(model, text, *extra):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.txt")
        with open(path, "wb") as fh:
            fh.write(text.encode("utf-8"))
        out = run("tokenize", "-m", model, "-f", path, *extra).stdout.decode("utf-8")
    assert out.count("\n") == 1, out
    return json.loads(out)


# ------------------------------------------------------------ tokenizer ----

def test_tokenize_matches_transformers():
    bad = []
    for c in CASES:
        extra = (["--special"] if c["special"] else []) + ["--no-bos"]
        got = tokenize_file(F32, c["text"], *extra)
        if got != c["ids"]:
            bad.append((c["text"], c["special"], got, c["ids"]))
    assert not bad, f"{len(bad)}/{len(CASES)} differ; first: {bad[0]!r}"


def test_no_bos_by_default():
    """The file has no add_bos_token key: a byte-level BPE adds none."""
    c = next(c for c in CASES if c["text"] == "Hello world")
    assert tokenize_file(F32, c["text"]) == c["ids"]


def test_pieces_match_transformers():
    for c in [c for c in CASES if c["text"]][:16]:
        extra = ["--pieces", "--no-bos"] + (["--special"] if c["special"] else [])
        assert tokenize_file(F32, c["text"], *extra) == c["pieces"], c["text"]


def test_detokenize_matches_transformers():
    for c in CASES:
        out = run("detokenize", "-m", F32, json.dumps(c["ids"])).stdout.decode("utf-8")
        assert out[:-1] == c["decoded"], (c["text"], c["ids"])
        out = run("detokenize", "-m", F32, "--special", json.dumps(c["ids"])).stdout.decode("utf-8")
        assert out[:-1] == c["decoded_special"] == c["text"], c["text"]


GPT4O_PAT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
             r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
             r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def test_tokenizer_fixture_is_o200k_like():
    """The reference ids come from a tokenizer split by o200k's published
    regex (guards a bad regeneration), and harmony tokens are single ids
    only when special text is parsed."""
    assert DOC["pre_tokenizer_regex"] == GPT4O_PAT
    assert DOC["gguf_metadata"]["tokenizer.ggml.pre"] == "gpt-4o"
    chat = [c for c in CASES if c["text"].startswith("<|start|>user")]
    assert {c["special"] for c in chat} == {True, False}
    assert all((SP["<|start|>"] in c["ids"]) == c["special"] for c in chat)


# -------------------------------------------------------- chat template ----

def _today_variants():
    return {time.strftime("%Y-%m-%d")}


def render(model, case, tmp_path, extra=()):
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(case["messages"], ensure_ascii=False), encoding="utf-8")
    args = ["template", "-m", model, "--messages", str(msgs), *extra]
    if not case["add_generation_prompt"]:
        args.append("--no-generation-prompt")
    for k, v in case.get("kwargs", {}).items():  # chat_template_kwargs: --reasoning-effort
        args += ["--" + k.replace("_", "-"), v]
    return run(*args, check=False)


def test_file_template_matches_jinja(tmp_path):
    """llmk writes today's date (local time) where the template calls
    strftime_now("%Y-%m-%d"); the fixture was rendered on a fixed date."""
    info = run("template", "-m", F32, "--info").stdout.decode()
    assert "template: harmony" in info
    assert CHAT["family"] == "harmony"
    fixed = "Current date: " + CHAT["date"] + "\n"
    for case in CHAT["cases"]:
        before = _today_variants()
        p = render(F32, case, tmp_path)
        assert p.returncode == 0, p.stderr.decode()
        got = p.stdout.decode("utf-8")
        days = before | _today_variants()
        want = {case["rendered"].replace(fixed, "Current date: " + d + "\n") for d in days}
        assert fixed in case["rendered"]
        assert got in want, (case["messages"], got)


def test_template_with_fixed_date_and_effort_matches_jinja(tmp_path):
    """--date gives the fixture's rendering exactly; the reasoning_effort
    cases (rendered by jinja2 with that template variable) too."""
    assert sum("kwargs" in c for c in CHAT["cases"]) == 2
    for case in CHAT["cases"]:
        p = render(F32, case, tmp_path, ["--date", CHAT["date"]])
        assert p.returncode == 0, p.stderr.decode()
        assert p.stdout.decode("utf-8") == case["rendered"], case


def test_reasoning_effort_and_date_refusals(tmp_path):
    case = dict(CHAT["cases"][0])
    for extra, words in [(["--reasoning-effort", "extreme"], b"reasoning_effort 'extreme'"),
                         (["--date", "5 Aug 2025"], b"not YYYY-MM-DD")]:
        p = render(F32, case, tmp_path, extra)
        assert p.returncode != 0 and words in p.stderr, p.stderr


def test_template_refusals(tmp_path):
    for case in CHAT["refused"]:
        p = render(F32, dict(case, add_generation_prompt=True), tmp_path)
        assert p.returncode != 0, case["messages"]
        assert b"harmony template" in p.stderr, p.stderr


def test_rendered_chat_tokenizes_like_transformers():
    """The generation prompt's tail, tokenized with special tokens parsed:
    transformers' ids of the same text."""
    ref = next(c for c in CASES if c["special"] and c["text"].startswith("<|start|>user<|message|>Hi there"))
    case = CHAT["cases"][0]
    assert case["messages"] == [{"role": "user", "content": "Hi there"}] and case["add_generation_prompt"]
    assert case["rendered"].endswith(ref["text"])
    assert tokenize_file(F32, ref["text"], "--special", "--no-bos") == ref["ids"]


# ---------------------------------------------------------------- model ----

def ref_logits(name):
    with np.load(os.path.join(TINY, "tiny_gptoss_logits.npz")) as z:
        return z[name]


def logits(model, ids, path):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        run("logits", "-m", model, "--ids", ",".join(map(str, ids)), "--path", path, "--out", out, *THREADS)
        return np.fromfile(out, dtype="<f4").reshape(len(ids), V).astype(np.float64)


def rel(a, b):
    return np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)


def test_fixture_is_self_consistent():
    import gguf

    kv = DOC["gguf_metadata"]
    assert kv["general.architecture"] == "gpt-oss"
    assert kv["gpt-oss.attention.sliding_window"] == DOC["hparams"]["sliding_window"] == 8
    assert not any("pattern" in k for k in kv), "no pattern key: the reader assumes 2 (even layers slide)"
    assert DOC["layer_types"] == ["sliding_attention", "full_attention"] * 2
    assert kv["gpt-oss.rope.scaling.type"] == "yarn" and kv["gpt-oss.rope.scaling.factor"] == 32.0
    assert kv["gpt-oss.rope.scaling.original_context_length"] == 4096
    assert DOC["rope"]["rope_parameters"]["truncate"] is False
    assert kv["tokenizer.ggml.pre"] == "gpt-4o"
    r = gguf.GGUFReader(F32)
    assert {t.name for t in r.tensors} == set(DOC["gguf_tensors"])
    for s in SEQS:
        a = ref_logits(s["name"])
        assert a.dtype == np.float32 and a.shape == (len(s["ids"]), V)
        assert int(np.argmax(a[-1])) == s["continuation"][0], s["name"]
        assert s["sliding_window_effect"]["beyond_window_max"] > 0.1
        assert s["router_min_gap"] > 1e-4
        assert s["gate_clamped_share"] > 0 and s["up_clamped_share"] > 0
    for name, per_seq in DOC["variant_effects_rel_l2_max"].items():
        assert min(per_seq.values()) > 1e-3, name


@pytest.mark.parametrize("path", ["ref", "f32"])
@pytest.mark.parametrize("i", range(len(SEQS)), ids=[s["name"] for s in SEQS])
def test_logits(i, path):
    s = SEQS[i]
    check_logits(F32, s["ids"], ref_logits(s["name"]), path, V, s["fp32_vs_fp64_rel_l2_max"])


@pytest.mark.parametrize("path", ["f32", "default"])
@pytest.mark.parametrize("i", range(len(SEQS)), ids=[s["name"] for s in SEQS])
def test_greedy(i, path):
    s = SEQS[i]
    check_greedy(F32, s["ids"], s["continuation"], DOC["n_greedy"], path)


@pytest.mark.parametrize("i", range(len(SEQS)), ids=[s["name"] for s in SEQS])
def test_fast_logits(i):
    s = SEQS[i]
    got, want = logits(F32, s["ids"], "fast"), ref_logits(s["name"]).astype(np.float64)
    assert rel(got, want).max() <= 3e-3
    assert (got.argmax(1) == want.argmax(1)).all()


@pytest.mark.parametrize("i", range(len(SEQS)), ids=[s["name"] for s in SEQS])
def test_mxfp4_paths_agree(i):
    """transformers ran the unquantized weights: the check is internal. The
    fast path's MXFP4 experts take int16 activations (the r8 kernels on MX4
    records): measured median 5.3-6.5e-4, max 2.0-3.3e-3, every argmax the
    f32 path's. (With 8-bit activations, the codec's dot as llama.cpp's,
    this random router's top-2 gaps of 0.017 flipped a few routes: median
    2.1-2.5e-2, max 0.27, argmax 89-98%.)"""
    if not os.path.exists(MX):
        pytest.fail("tiny_gptoss_mxfp4.gguf is missing (model_gptoss.py writes it with llama-quantize)")
    s = SEQS[i]
    ids = s["ids"] + s["continuation"]
    ref, f32, fast = (logits(MX, ids, p) for p in ("ref", "f32", "fast"))
    assert rel(f32, ref).max() <= 1e-4
    assert np.median(rel(fast, f32)) <= 2e-3
    assert rel(fast, f32).max() <= 1e-2
    assert (fast.argmax(1) == f32.argmax(1)).all()


def _numpy_first_position(path, tok):
    """gpt-oss's math for one token at position 0 in numpy over gguf-py's
    dequantization of every tensor: RoPE is the identity there but for
    YaRN's factor on q and k, so this checks the rest (sinks, biases,
    router, clamped experts) independently of transformers' code."""
    import gguf

    r = gguf.GGUFReader(path)
    T = {t.name: gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64).reshape(
        [int(x) for x in reversed(t.shape)]) for t in r.tensors}
    hp = DOC["hparams"]
    H, KV, HD, K = hp["heads"], hp["kv_heads"], hp["head_dim"], hp["top_k"]
    eps, af = hp["eps"], 0.1 * np.log(hp["rope"]["factor"]) + 1

    def rms(x, w):
        return x / np.sqrt((x * x).mean() + eps) * w

    x = T["token_embd.weight"][tok].copy()
    for il in range(hp["layers"]):
        p = f"blk.{il}."
        h = rms(x, T[p + "attn_norm.weight"])
        q, k, v = ((T[p + f"attn_{n}.weight"] @ h + T[p + f"attn_{n}.bias"]) for n in "qkv")
        att = np.zeros(H * HD)
        for hh in range(H):
            g = hh // (H // KV)
            sc = af * af * (q[hh * HD:(hh + 1) * HD] @ k[g * HD:(g + 1) * HD]) / np.sqrt(HD)
            sink = T[p + "attn_sinks.weight"][hh]
            m = max(sc, sink)
            att[hh * HD:(hh + 1) * HD] = np.exp(sc - m) / (np.exp(sc - m) + np.exp(sink - m)) * v[g * HD:(g + 1) * HD]
        x = x + T[p + "attn_output.weight"] @ att + T[p + "attn_output.bias"]
        h = rms(x, T[p + "post_attention_norm.weight"])
        logit = T[p + "ffn_gate_inp.weight"] @ h + T[p + "ffn_gate_inp.bias"]
        sel = np.argsort(-logit, kind="stable")[:K]
        w = np.exp(logit[sel] - logit[sel].max())
        w /= w.sum()
        for j, e in enumerate(sel):
            gg = np.minimum(T[p + "ffn_gate_exps.weight"][e] @ h + T[p + "ffn_gate_exps.bias"][e], 7.0)
            uu = np.clip(T[p + "ffn_up_exps.weight"][e] @ h + T[p + "ffn_up_exps.bias"][e], -7.0, 7.0)
            a = gg / (1 + np.exp(-1.702 * gg)) * (uu + 1)
            x = x + w[j] * (T[p + "ffn_down_exps.weight"][e] @ a + T[p + "ffn_down_exps.bias"][e])
    return T["output.weight"] @ rms(x, T["output_norm.weight"])


def test_first_position_matches_numpy():
    """(The MXFP4 file's experts move this random model's logits far from
    transformers', routing changes cascading; the pinned gguf-py cannot read
    MXFP4, so that file is checked only against llmk's own paths.)"""
    path = F32
    for s in SEQS:
        tok = s["ids"][0]
        want = _numpy_first_position(path, tok)
        for p in ("ref", "f32"):
            got = logits(path, [tok], p)[0]
            assert np.linalg.norm(got - want) / np.linalg.norm(want) <= 1e-5, (s["name"], p)


# Each feature must be needed: the same weights with it changed miss the
# fixture on the longest sequence (past the window, through the full layers).
def _zero(suffix):
    return lambda name, a: np.zeros_like(a) if name.endswith(suffix) else a


SENSITIVITY = {
    "no-sliding-window": dict(kv={"gpt-oss.attention.sliding_window": (1 << 20, "u32")}),
    "no-rope-scaling": dict(kv={"gpt-oss.rope.scaling.factor": (1.0, "f32")}),
    "no-yarn-type": dict(kv={"gpt-oss.rope.scaling.type": ("none", "str")}),
    "sinks-off": dict(tensor_fn=lambda n, a: np.full_like(a, -1e30) if n.endswith("attn_sinks.weight") else a),
    "no-router-bias": dict(tensor_fn=_zero("ffn_gate_inp.bias")),
    "no-expert-biases": dict(tensor_fn=lambda n, a: np.zeros_like(a) if n.endswith("_exps.bias") else a),
    "no-output-bias": dict(tensor_fn=_zero("attn_output.bias")),
}


@pytest.mark.parametrize("case", list(SENSITIVITY))
def test_feature_is_needed(case, tmp_path):
    import gguf
    from test_moe import rewrite

    types = {"u32": gguf.GGUFValueType.UINT32, "f32": gguf.GGUFValueType.FLOAT32,
             "str": gguf.GGUFValueType.STRING}
    c = SENSITIVITY[case]
    kv = {k: (v, types[t]) for k, (v, t) in c.get("kv", {}).items()}
    dst = str(tmp_path / "m.gguf")
    rewrite(F32, dst, kv=kv, tensor_fn=c.get("tensor_fn"))
    s = max(SEQS, key=lambda s: len(s["ids"]))
    got = logits(dst, s["ids"], "f32")
    assert rel(got, ref_logits(s["name"]).astype(np.float64)).max() > 1e-2, case


# Tokens a sampled run is steered onto (+40 logit bias) so that the tiny
# random model writes harmony messages: <|channel|>, <|message|>, <|end|>,
# and the ASCII pieces "an", "alysis" (the analysis channel's name), "x", "y".
HARMONY_STEER = [SP["<|channel|>"], SP["<|message|>"], SP["<|end|>"], 264, 617, 87, 88]


def harmony_pieces():
    """Each token's bytes, for the ASCII ones the steered runs use (byte-level
    BPE: 'Ġ' is the space)."""
    import gguf

    f = gguf.GGUFReader(F32).fields["tokenizer.ggml.tokens"]
    pieces = {i: bytes(f.parts[j]).decode("utf-8").replace("\u0120", " ").encode() for i, j in enumerate(f.data)}
    assert all(pieces[i].isascii() for i in HARMONY_STEER[3:])
    return pieces


def harmony_parts(ids, pieces):
    """The harmony rule as OpenAI's format states it, independently of
    llmk_harmony_feed: <|start|>, <|end|>, <|return|>, <|call|> open a
    header; <|channel|> a channel name (the text up to <|message|>);
    <|message|> a body, reasoning when the name is "analysis" (optionally
    followed by a space and more), content otherwise; text outside any
    message is content. Returns (content, reasoning) bytes."""
    header = {SP[k] for k in ("<|start|>", "<|end|>", "<|return|>", "<|call|>")}
    phase, name, analysis = "outside", b"", False
    content, reasoning = b"", b""
    for i in ids:
        if i in header:
            phase = "header"
        elif i == SP["<|channel|>"]:
            phase, name = "channel", b""
        elif i == SP["<|message|>"]:
            phase, analysis = "body", name == b"analysis" or name.startswith(b"analysis ")
        elif phase == "channel":
            name += pieces[i]
        elif phase == "body" and analysis:
            reasoning += pieces[i]
        elif phase != "header":
            content += pieces[i]
    return content, reasoning


def test_run_splits_a_harmony_answer_by_channel():
    """llmk run (and llmk chat) on a harmony model: the answer (final
    channel, text outside messages) on stdout, the analysis channel on
    stderr, markers and headers nowhere. The tiny random model never writes markers on its own, so a
    sampled run is steered (+40 logit bias) onto the markers and a few ASCII
    tokens, and its ids (--print-ids, same seed) are split by the rule
    above."""
    pieces, steer = harmony_pieces(), HARMONY_STEER

    def args(seed):
        a = ["run", "-m", F32, "-p", "Hello", "-n", "200", "--temp", "1", "-s", str(seed), "--log-disable"]
        for i in steer:
            a += ["--logit-bias", f"{i}=40"]
        return a

    # the first seed whose ids hold both channels (sampling is per seed, so
    # the search ends at the same seed every run)
    for seed in range(1, 200):
        ids = json.loads(run(*args(seed), "--print-ids").stdout)
        assert set(ids) <= set(steer), ids
        content, reasoning = harmony_parts(ids, pieces)
        if content and reasoning:
            break
    assert content and reasoning, "no seed gave an analysis and a final message"
    p = run(*args(seed))
    assert p.stdout == content + b"\n"
    assert p.stderr == reasoning
    # without the template (--raw), nothing is split: no text on stderr
    assert run(*args(seed), "--raw").stderr == b""
    # llmk chat, the same turn on stdin with the same options: the same split
    chat = ["chat" if a == "run" else a for a in args(seed) if a not in ("-p", "Hello")]
    c = subprocess.run([LLMK, *chat], input=b"Hello\n", capture_output=True, timeout=120)
    assert c.returncode == 0, c.stderr
    assert (c.stdout, c.stderr) == (content + b"\n", reasoning)
