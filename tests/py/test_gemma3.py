"""gemma3 against transformers: tokenizer, chat template, logits.

Fixtures: tests/fixtures/model/tiny/tiny_gemma3{,_q8_0}.gguf, a random
Gemma3ForCausalLM (layers 0-4 sliding window 8, layer 5 global; per-layer-type
rope) with a Gemma-style SentencePiece tokenizer, converted by llama.cpp's
convert_hf_to_gguf.py (tests/ref/model_gemma3.py; docs/testing.md).

- Tokenizer (needs only the file's tokenizer, so it runs whatever the decode
  paths support): `llmk tokenize` gives transformers' GemmaTokenizer ids for
  every text of the tokenizer corpus plus turn texts, with and without the
  BOS; pieces; `llmk detokenize` gives transformers' decode (and the text
  back, byte for byte: no dummy prefix to drop).
- Chat template: the file's template is recognised as gemma and renders the
  jinja2 fixture (tests/fixtures/chat/gemma3.json); the rendering tokenizes
  to transformers' ids.
- Model: logits within the tiny fixtures' tolerances on the ref and f32
  paths and 3e-3 on the fast path, greedy identical, the Q8_0 file's paths
  against each other, the final logit soft-cap on every path, and the
  sliding window, the sliding layers' rope base and the global layers'
  linear scaling each needed to meet the fixture.
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import pytest

from test_model_fixtures import LLMK, THREADS, TINY, check_greedy, check_logits

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(TINY, "tiny_gemma3.json"), encoding="utf-8") as f:
    DOC = json.load(f)
with open(os.path.join(ROOT, "tests", "fixtures", "chat", "gemma3.json"), encoding="utf-8") as f:
    CHAT = json.load(f)
F32 = os.path.join(TINY, "tiny_gemma3.gguf")
Q8 = os.path.join(TINY, "tiny_gemma3_q8_0.gguf")
V = DOC["n_vocab"]
SEQS = DOC["sequences"]
CASES = DOC["tokenize"]


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

@pytest.mark.parametrize("bos", [False, True], ids=["no-bos", "bos"])
def test_tokenize_matches_transformers(bos):
    bad = []
    for c in CASES:
        extra = (["--special"] if c["special"] else []) + ([] if bos else ["--no-bos"])
        got = tokenize_file(F32, c["text"], *extra)
        want = c["ids_with_bos"] if bos else c["ids"]
        if got != want:
            bad.append((c["text"], c["special"], got, want))
    assert not bad, f"{len(bad)}/{len(CASES)} differ; first: {bad[0]!r}"


def test_pieces_match_transformers():
    for c in [c for c in CASES if c["text"]][:12]:
        extra = ["--pieces", "--no-bos"] + (["--special"] if c["special"] else [])
        assert tokenize_file(F32, c["text"], *extra) == c["pieces"], c["text"]


def test_detokenize_matches_transformers():
    for c in CASES:
        out = run("detokenize", "-m", F32, json.dumps(c["ids_with_bos"])).stdout.decode("utf-8")
        assert out[:-1] == c["decoded"], (c["text"], c["ids_with_bos"])
        if not c["special"]:
            assert out[:-1] == c["text"]  # byte fallback, no dummy prefix: nothing lost
        else:
            out = run("detokenize", "-m", F32, "--special", json.dumps(c["ids_with_bos"])).stdout
            assert out.decode("utf-8")[:-1] == "<bos>" + c["text"]


def test_tokenizer_fixture_is_gemma_like():
    """The fixture exercises what Gemma's tokenizer does differently (guards a
    bad regeneration): spaces kept as pieces at the start, digits split,
    byte fallback, turn tokens as single ids only when parsed."""
    by_text = {(c["text"], c["special"]): c for c in CASES}
    assert not by_text[("Hello world", False)]["pieces"][0].startswith("\u2581")  # no dummy prefix
    assert by_text[("  two leading and two trailing  ", False)]["pieces"][0] == "\u2581\u2581"
    c = by_text[("Numbers: 0 7 42 1234 3.14159 1,000,000 and 123456789012345678901234567890", False)]
    assert "42" not in c["pieces"] and "4" in c["pieces"]
    assert any(p.startswith("<0x") for c in CASES for p in c["pieces"])
    chat = [c for c in CASES if c["text"].startswith("<start_of_turn>user")]
    assert {c["special"] for c in chat} == {True, False}
    sot = DOC["special_ids"]["<start_of_turn>"]
    assert all((sot in c["ids"]) == c["special"] for c in chat)
    assert all(c["sentencepiece_agrees"] is not False for c in CASES)


# -------------------------------------------------------- chat template ----

def test_file_template_matches_jinja(tmp_path):
    info = run("template", "-m", F32, "--info").stdout.decode()
    assert "template: gemma" in info
    assert CHAT["template"] == DOC["chat_template"]
    for case in CHAT["cases"]:
        msgs = tmp_path / "m.json"
        msgs.write_text(json.dumps(case["messages"], ensure_ascii=False), encoding="utf-8")
        args = ["template", "-m", F32, "--messages", str(msgs)]
        if not case["add_generation_prompt"]:
            args.append("--no-generation-prompt")
        assert run(*args).stdout.decode("utf-8") == case["rendered"], case["messages"]


def test_rendered_chat_tokenizes_like_transformers():
    """One user turn with the generation prompt, rendered (it starts with the
    text <bos>), tokenized with special tokens parsed and no BOS added:
    transformers' ids of the same turn text after its BOS."""
    case = CHAT["cases"][0]
    assert case["messages"] == [{"role": "user", "content": "Hi there"}] and case["add_generation_prompt"]
    ref = next(c for c in CASES if c["special"] and "<bos>" + c["text"] == case["rendered"])
    assert tokenize_file(F32, case["rendered"], "--special", "--no-bos") == ref["ids_with_bos"]


# ---------------------------------------------------------------- model ----

def ref_logits(name):
    with np.load(os.path.join(TINY, "tiny_gemma3_logits.npz")) as z:
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
    assert kv["general.architecture"] == "gemma3"
    assert kv["gemma3.attention.sliding_window"] == DOC["hparams"]["sliding_window"] == 8
    assert not any("pattern" in k for k in kv), "the converter writes no pattern; the reader assumes 6"
    assert DOC["layer_types"] == ["sliding_attention"] * 5 + ["full_attention"]
    assert kv["gemma3.rope.scaling.type"] == "linear" and kv["gemma3.rope.scaling.factor"] == 8.0
    assert kv["tokenizer.ggml.add_space_prefix"] is False
    r = gguf.GGUFReader(F32)
    assert {t.name for t in r.tensors} == set(DOC["gguf_tensors"])
    for s in SEQS:
        a = ref_logits(s["name"])
        assert a.dtype == np.float32 and a.shape == (len(s["ids"]), V)
        assert int(np.argmax(a[-1])) == s["continuation"][0], s["name"]
        assert len(s["ids"]) + len(s["continuation"]) > 2 * DOC["hparams"]["sliding_window"]
        assert s["sliding_window_effect"]["beyond_window_max"] > 0.1


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
def test_q8_0_paths_agree(i):
    """transformers ran the unquantized weights: the check is internal."""
    s = SEQS[i]
    ids = s["ids"] + s["continuation"]
    ref, f32, fast = (logits(Q8, ids, p) for p in ("ref", "f32", "fast"))
    assert rel(f32, ref).max() <= 1e-4
    # measured 0.6-1.0e-3 (the fast path's 16-bit activations)
    assert rel(fast, f32).max() <= 3e-3
    assert (fast.argmax(1) == f32.argmax(1)).all()


@pytest.mark.parametrize("i", range(len(SEQS)), ids=[s["name"] for s in SEQS])
def test_fast_logits(i):
    # measured 0.7-1.4e-3 from transformers on the F32 file
    s = SEQS[i]
    got, want = logits(F32, s["ids"], "fast"), ref_logits(s["name"]).astype(np.float64)
    assert rel(got, want).max() <= 3e-3
    assert (got.argmax(1) == want.argmax(1)).all()


@pytest.mark.parametrize("path", ["ref", "f32", "fast"])
def test_final_logit_softcap(path, tmp_path):
    """gemma3.final_logit_softcapping (gemma 2's key, which the converter
    writes when a config has it): logits = c tanh(l / c), on every path."""
    import gguf
    from test_moe import rewrite

    cap = 3.0
    dst = str(tmp_path / "cap.gguf")
    rewrite(F32, dst, kv={"gemma3.final_logit_softcapping": (cap, gguf.GGUFValueType.FLOAT32)})
    s = SEQS[0]
    want = ref_logits(s["name"]).astype(np.float64)
    want = cap * np.tanh(want / cap)
    got = logits(dst, s["ids"], path)
    assert rel(got, want).max() <= (1e-4 if path != "fast" else 3e-3)
    assert np.abs(got).max() <= cap


# Each feature must be needed: the same weights with it changed miss the
# fixture on the longest sequence (past the window, through the global layer).
SENSITIVITY = {
    "no-sliding-window": {"gemma3.attention.sliding_window": 1 << 20},
    "swa-rope-base-as-global": {"gemma3.rope.freq_base_swa": 1e6},
    "no-rope-scaling": {"gemma3.rope.scaling.factor": 1.0},
}


@pytest.mark.parametrize("case", list(SENSITIVITY))
def test_feature_is_needed(case, tmp_path):
    import gguf
    from test_moe import rewrite

    kv = {}
    for k, v in SENSITIVITY[case].items():
        kv[k] = (v, gguf.GGUFValueType.UINT32 if isinstance(v, int) else gguf.GGUFValueType.FLOAT32)
    dst = str(tmp_path / "m.gguf")
    rewrite(F32, dst, kv=kv)
    s = max(SEQS, key=lambda s: len(s["ids"]))
    got = logits(dst, s["ids"], "f32")
    assert rel(got, ref_logits(s["name"]).astype(np.float64)).max() > 1e-2, case


def test_program_header_counts_the_last_post_norm():
    """`llmk info --program`'s header adds up: the last layer's FFN post-norm
    is a phase of its own (no next norm to fuse into), counted as "+ 1"."""
    import re
    out = run("info", "-m", F32, "--program").stdout.decode()
    m = re.match(r"program: (\d+) phases \(1 \+ (\d+) layers x (\d+)(?: \+ (\d+))? \+ (\d+) final\)", out)
    assert m, out.splitlines()[0]
    total, layers, per, extra, final = (int(x or 0) for x in m.groups())
    assert extra == 1 and total == 1 + layers * per + extra + final
    assert len([l for l in out.splitlines() if re.match(r"\s*\d+  ", l)]) == total
