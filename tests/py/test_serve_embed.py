"""`llmk serve --embeddings`: OpenAI's /v1/embeddings.

The vectors must be `llmk embed`'s, bit for bit (the same session path and
pooling code; test_embed.py checks those against the f64 reference and
numpy), whether asked as floats or base64 through the official `openai`
client, one input or several, text or token ids, and while generation runs
on the same server. Errors are 400s naming the field; a server started
without --embeddings answers 501."""
import base64
import concurrent.futures
import json
import subprocess

import numpy as np
import pytest

from test_serve import BIN, MODEL, Server, error_of, http_req

openai = pytest.importorskip("openai")

TEXTS = ["The capital of France is Paris.", "def add(a, b):\n    return a + b", "Hello"]


def llmk_embed(text, *args):
    # a separator not in the texts: embed splits -p at newlines by default
    r = subprocess.run([BIN, "embed", "-m", MODEL, "-p", text, "--embd-separator", "<#sep#>",
                        "--embd-output-format", "json", *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return np.array(json.loads(r.stdout)["data"][0]["embedding"], dtype=np.float32)


@pytest.fixture(scope="module")
def srv():
    s = Server("--embeddings", "-np", "2", "-c", "512")
    yield s
    assert s.stop() == 0, s.err()


def test_vectors_are_llmk_embeds(srv):
    want = [llmk_embed(t) for t in TEXTS]
    client = srv.client()
    got_b64 = client.embeddings.create(model=MODEL.name, input=TEXTS)  # the client asks for base64 and decodes it
    got_f = client.embeddings.create(model=MODEL.name, input=TEXTS, encoding_format="float")
    assert [d.index for d in got_f.data] == [0, 1, 2]
    for w, a, b in zip(want, got_b64.data, got_f.data):
        assert len(a.embedding) == 576
        np.testing.assert_array_equal(np.array(a.embedding, dtype=np.float32), w)
        np.testing.assert_array_equal(np.array(b.embedding, dtype=np.float32), w)
        assert abs(float(np.linalg.norm(w.astype(np.float64))) - 1) < 1e-6  # L2-normalized
    assert got_f.usage.prompt_tokens == got_f.usage.total_tokens > 3
    # raw base64 is the little-endian float32 bytes
    st, _, body = http_req(srv, "POST", "/v1/embeddings", {"input": TEXTS[0], "encoding_format": "base64"})
    assert st == 200
    raw = np.frombuffer(base64.b64decode(json.loads(body)["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_array_equal(raw, want[0])


def test_token_ids_and_last_pooling():
    s = Server("--embeddings", "--pooling", "last", "-c", "256")
    try:
        ids = json.loads(subprocess.run([BIN, "tokenize", "-m", MODEL, "--special", TEXTS[0]], capture_output=True,
                                        text=True, timeout=60, check=True).stdout)
        want = llmk_embed(TEXTS[0], "--pooling", "last")
        for inp in (TEXTS[0], ids, [ids]):
            st, _, body = http_req(s, "POST", "/v1/embeddings", {"input": inp})
            assert st == 200, body
            np.testing.assert_array_equal(np.array(json.loads(body)["data"][0]["embedding"], dtype=np.float32), want)
    finally:
        assert s.stop() == 0, s.err()


def test_embeddings_beside_generation(srv):
    want = llmk_embed(TEXTS[1])
    client = srv.client()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        gens = [pool.submit(client.completions.create, model=MODEL.name, prompt="Once upon a time", max_tokens=24,
                            temperature=0) for _ in range(2)]
        embs = [pool.submit(client.embeddings.create, model=MODEL.name, input=TEXTS[1], encoding_format="float")
                for _ in range(4)]
        for f in embs:
            np.testing.assert_array_equal(np.array(f.result().data[0].embedding, dtype=np.float32), want)
        texts = {g.result().choices[0].text for g in gens}
    assert len(texts) == 1  # greedy: the same text for both


@pytest.mark.parametrize("body,param,needle", [
    ({}, "input", "'input' is required"),
    ({"input": []}, "input", "empty list"),
    ({"input": [""]}, "input", None),  # BOS only: fine if the model adds one, else "no tokens"
    ({"input": 5}, "input", "must be a string"),
    ({"input": [[1, 2, 49152]]}, "input", "token id in [0, 49152)"),
    ({"input": [["a"]]}, "input", "token id"),
    ({"input": "x" * 3000}, "input", "the context (-c) holds 512"),
    ({"input": "x", "encoding_format": "int8"}, "encoding_format", "\"float\" or \"base64\""),
    ({"input": "x", "dimensions": 64}, "dimensions", "576 values"),
])
def test_bad_requests(srv, body, param, needle):
    st, _, raw = http_req(srv, "POST", "/v1/embeddings", body)
    if needle is None:
        assert st in (200, 400), raw
        return
    msg = error_of((st, None, raw), 400, param)["message"]
    assert needle in msg, msg


def test_not_json_and_wrong_model(srv):
    st, _, raw = http_req(srv, "POST", "/v1/embeddings", b"{nope")
    assert st == 400 and b"not valid JSON" in raw
    st, _, raw = http_req(srv, "POST", "/v1/embeddings", {"input": "x", "model": "gpt-4"})
    assert st == 404 and json.loads(raw)["error"]["code"] == "model_not_found"


def test_without_flag_is_501():
    s = Server("-c", "256")
    try:
        st, _, raw = http_req(s, "POST", "/v1/embeddings", {"input": "x"})
        assert st == 501 and b"--embeddings" in raw, raw
        st, _, _ = http_req(s, "POST", "/embeddings", {"input": "x"})
        assert st == 501
    finally:
        assert s.stop() == 0, s.err()


def test_bad_pooling_flag():
    r = subprocess.run([BIN, "serve", "-m", MODEL, "--embeddings", "--pooling", "cls"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--pooling expects mean or last, got 'cls'" in r.stderr, r.stderr
