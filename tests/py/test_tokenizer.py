"""llmk tokenize / detokenize against reference-tokenizer fixtures
(tests/ref/make_tokenizer_fixtures.py writes them)."""
import json
import os
import subprocess
import tempfile

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures", "tokenizer")
BIN = os.environ.get("LLMK_BIN", os.path.join(ROOT, "build", "llmk"))
DEFAULT_MODEL = os.path.join(os.environ.get("LLMK_MODELS", os.path.expanduser("~/.cache/llmk")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")
SETS = ["smollm2", "tiny_llama_bpe", "tiny_qwen2", "tiny_spm"]


def load_set(name):
    with open(os.path.join(FIX, name + ".json"), encoding="utf-8") as fh:
        data = json.load(fh)
    model = DEFAULT_MODEL if data["model"] == "default" else os.path.join(FIX, data["model"])
    if not os.path.exists(model):
        pytest.skip(f"model {model} not present")
    return data, model


def run(*args, input_bytes=None, check=True):
    p = subprocess.run([BIN, *args], input=input_bytes, capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    return p


def tokenize_all(model, cases, extra=()):
    """Tokenize every case through -f FILE; returns a list of parsed JSON arrays."""
    outs = []
    with tempfile.TemporaryDirectory() as d:
        for i, c in enumerate(cases):
            path = os.path.join(d, f"{i}.txt")
            with open(path, "wb") as fh:
                fh.write(c["text"].encode("utf-8"))
            args = ["tokenize", "-m", model, "-f", path, *extra]
            if c["special"]:
                args.append("--special")
            out = run(*args).stdout.decode("utf-8")
            assert out.count("\n") == 1 and out.endswith("\n"), out  # one line
            outs.append(json.loads(out))
    return outs


@pytest.mark.parametrize("name", SETS)
def test_ids_match_reference(name):
    data, model = load_set(name)
    got = tokenize_all(model, data["cases"])
    bad = [(c["text"], c["special"], g, c["ids"]) for c, g in zip(data["cases"], got)
           if g != c["ids"]]
    assert not bad, f"{len(bad)}/{len(got)} differ; first: {bad[0]!r}"


@pytest.mark.parametrize("name", SETS)
def test_pieces_match_reference(name):
    data, model = load_set(name)
    cases = [c for c in data["cases"] if c["text"]][:8]
    got = tokenize_all(model, cases, ["--pieces"])
    for c, g in zip(cases, got):
        assert g == c["pieces"], c["text"]


@pytest.mark.parametrize("name", SETS)
def test_detokenize_matches_reference(name):
    data, model = load_set(name)
    for c in data["cases"]:
        out = run("detokenize", "-m", model, json.dumps(c["ids"])).stdout.decode("utf-8")
        assert out.endswith("\n")
        assert out[:-1] == c["decoded"], (c["text"], c["ids"])
        if data["byte_level"] and not c["special"]:
            assert out[:-1] == c["text"]  # byte-level BPE loses nothing


def test_no_bos_and_comma_ids():
    data, model = load_set("tiny_llama_bpe")
    c = next(c for c in data["cases"] if c["text"] == "Hello world")
    bos = c["ids"][0]
    got = json.loads(run("tokenize", "-m", model, "Hello world").stdout)
    assert got == c["ids"] and got[0] == bos
    got = json.loads(run("tokenize", "-m", model, "--no-bos", "Hello world").stdout)
    assert got == c["ids"][1:]
    ids = ",".join(str(i) for i in c["ids"])
    assert run("detokenize", "-m", model, ids).stdout == b"Hello world\n"
    out = run("detokenize", "-m", model, "--special", ids).stdout.decode()
    assert out.startswith("<|begin_of_text|>") and out.endswith("Hello world\n")


def test_default_model_without_m():
    data, model = load_set("smollm2")
    c = next(c for c in data["cases"] if c["text"] == "Hello, world! How are you today?")
    env = dict(os.environ, LLMK_MODELS=os.path.dirname(model))
    p = subprocess.run([BIN, "tokenize", c["text"]], capture_output=True, env=env, timeout=60)
    assert p.returncode == 0 and json.loads(p.stdout) == c["ids"]


def test_errors():
    _, model = load_set("tiny_qwen2")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bad.txt")
        with open(path, "wb") as fh:
            fh.write(b"ok \xff\xfe bad")
        p = run("tokenize", "-m", model, "-f", path, check=False)
        assert p.returncode == 1 and b"llmk_invalid_utf8" in p.stderr and b"byte 3" in p.stderr
    p = run("detokenize", "-m", model, "1,99999999", check=False)
    assert p.returncode == 1 and b"llmk_invalid_token" in p.stderr
    p = run("detokenize", "-m", model, "1,x", check=False)
    assert p.returncode == 2
    p = run("tokenize", "-m", model, check=False)
    assert p.returncode == 2
    p = run("tokenize", "-m", os.path.join(FIX, "missing.gguf"), "x", check=False)
    assert p.returncode == 1
    for cmd in ("tokenize", "detokenize"):
        p = run(cmd, "-h")
        assert b"usage: llmk " + cmd.encode() in p.stdout
