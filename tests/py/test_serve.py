"""`llmk serve` (issue 18): the OpenAI API over HTTP on the batching engine.

A real server on loopback (--port 0; the port is read from its stderr),
driven by the official `openai` client unchanged and by plain HTTP for what
the client hides (status codes, headers, raw bodies, a client that hangs up).
Greedy answers are `llmk run --temp 0`'s tokens, alone and among 15
concurrent requests; seeded sampling is reproducible; streams carry the same
text as whole answers; every error has its status and an OpenAI error
object; a client that leaves mid-stream frees its sequence; SIGTERM drains.

LLMK_SERVE_BIN runs the whole file against another binary (the ASan build);
LLMK_SAN_BIN, when set, also gets a short run of its own."""
import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
SERVE_BIN = os.environ.get("LLMK_SERVE_BIN", BIN)
SAN_BIN = os.environ.get("LLMK_SAN_BIN")
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")

N = 12
EOG = (0, 2)  # the default model's end-of-generation ids
PROMPTS = ["The capital of France is", "Hello", "Write a list of three fruits:\n1.", "def fibonacci(n):",
           "The lighthouse keeper climbed the spiral stairs every evening, counting the steps as his father "
           "had taught him. One night a ship"]


class Server:
    """llmk serve on 127.0.0.1, a free port; stderr is collected."""

    def __init__(self, *args, binary=SERVE_BIN, model=MODEL):
        self.p = subprocess.Popen([binary, "serve", "-m", str(model), "--port", "0", *map(str, args)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = []
        line = self.p.stderr.readline()
        self.lines.append(line)
        m = re.match(r"llmk serve: listening on http://127\.0\.0\.1:(\d+)$", line.strip())
        assert m, line + self.p.stderr.read()
        self.port = int(m.group(1))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        deadline = time.time() + 60
        while http_req(self, "GET", "/health")[0] != 200:
            assert time.time() < deadline and self.p.poll() is None, self.err()
            time.sleep(0.05)

    def _read(self):
        for line in self.p.stderr:
            self.lines.append(line)

    def err(self):
        return "".join(self.lines)

    def client(self, key="x"):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key, max_retries=0, timeout=120)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        rc = self.p.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return rc


def http_req(srv, method, path, body=None, headers=None, timeout=120):
    """(status, headers, body bytes); never raises on an HTTP status."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{srv.port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()
    except (ConnectionError, urllib.error.URLError) as e:
        return 0, {}, str(e).encode()


def metrics(srv, headers=None):
    st, _, body = http_req(srv, "GET", "/metrics", headers=headers)
    assert st == 200
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def settled(srv, cond=lambda m: True, timeout=20):
    """Metrics once no sequence runs or waits and cond holds: the engine
    thread publishes its figures after each step, so an answer can arrive a
    step before the figures that show its sequence gone."""
    deadline = time.time() + timeout
    while True:
        m = metrics(srv)
        if m["llmk_sequences_running"] == 0 and m["llmk_sequences_queued"] == 0 and cond(m):
            return m
        assert time.time() < deadline, m
        time.sleep(0.05)


def run_ids(*args):
    # /v1/completions is plain completion: `llmk run --raw` (run formats -p with the chat template by default)
    args = args if "--chat" in args else ("--raw", *args)
    r = subprocess.run([BIN, "run", "-m", MODEL, "--print-ids", *map(str, args)], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def error_of(resp, status, param=None):
    st, _, body = resp
    assert st == status, (st, body)
    e = json.loads(body)["error"]
    assert isinstance(e["message"], str) and e["message"] and "type" in e and "code" in e and "param" in e
    if param:
        assert e["param"] == param, e
    return e


@pytest.fixture(scope="module")
def srv():
    s = Server("-np", 4, "-c", 1024)
    yield s
    assert s.stop() == 0, s.err()
    assert "AddressSanitizer" not in s.err() and "runtime error" not in s.err(), s.err()


@pytest.fixture(scope="module")
def client(srv):
    return srv.client()


# ---- answers ---------------------------------------------------------------------


def test_health_and_models(srv, client):
    st, hdr, body = http_req(srv, "GET", "/health")
    assert st == 200 and json.loads(body) == {"status": "ok"}
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL.name]


def test_cached_tokens_count_the_prefix_cache(srv, client):
    # ~300 tokens: the second request finds the first one's two full KV blocks
    prompt = "The lighthouse keeper climbed the spiral stairs every evening and lit the lamp. " * 20
    first = client.completions.create(model=MODEL.name, prompt=prompt, max_tokens=2, temperature=0)
    again = client.completions.create(model=MODEL.name, prompt=prompt + "Then", max_tokens=2, temperature=0)
    assert first.usage.prompt_tokens > 256 and again.usage.prompt_tokens > 256
    assert again.usage.prompt_tokens_details.cached_tokens == 256, again.usage
    assert first.usage.prompt_tokens_details.cached_tokens in (0, 256)  # 256 if an earlier test sent it


def test_completion_matches_run(srv, client):
    for p in PROMPTS[:3]:
        ids = run_ids("--temp", 0, "-n", N, "-p", p)
        r = client.completions.create(model=MODEL.name, prompt=p, max_tokens=N, temperature=0,
                                      extra_body={"return_token_ids": True})
        assert r.object == "text_completion" and r.model == MODEL.name and r.id
        c = r.choices[0]
        assert c.index == 0 and c.token_ids == ids, p
        assert c.finish_reason == ("stop" if ids[-1] in EOG else "length")
        assert r.usage.completion_tokens == len(ids)
        assert r.usage.total_tokens == r.usage.prompt_tokens + len(ids)
        assert r.usage.prompt_tokens_details.cached_tokens == 0  # shorter than one KV block
        text = subprocess.run([BIN, "run", "-m", str(MODEL), "--raw", "--no-display-prompt", "--temp", "0", "-n",
                               str(N), "-p", p],
                              capture_output=True, text=True, timeout=300).stdout
        assert c.text == text[:-1], p  # run ends its output with a newline


def test_chat_matches_run_chat(client):
    ids = run_ids("--temp", 0, "-n", N, "--chat", "-p", "Hi")
    r = client.chat.completions.create(model="", messages=[{"role": "user", "content": "Hi"}], max_tokens=N,
                                       temperature=0, extra_body={"return_token_ids": True})
    assert r.object == "chat.completion"
    c = r.choices[0]
    assert c.message.role == "assistant" and c.message.content
    assert c.token_ids == ids
    assert r.usage.completion_tokens == len(ids)


def test_stream_equals_whole(client):
    msgs = [{"role": "user", "content": "Name three colours."}]
    whole = client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=20, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL.name, messages=msgs, max_tokens=20, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    fins = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert fins == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # completions too, without usage
    w = client.completions.create(model=MODEL.name, prompt=PROMPTS[2], max_tokens=16, temperature=0)
    s = list(client.completions.create(model=MODEL.name, prompt=PROMPTS[2], max_tokens=16, temperature=0,
                                       stream=True))
    assert "".join(c.choices[0].text for c in s) == w.choices[0].text
    assert all(c.usage is None for c in s)


def test_stop_strings(client):
    p = PROMPTS[2]
    full = client.completions.create(model="", prompt=p, max_tokens=24, temperature=0).choices[0].text
    assert "\n" in full.strip()
    stop = full.strip().split("\n")[1][:2]  # the start of the second line
    cut = full[:full.index(stop)]
    r = client.completions.create(model="", prompt=p, max_tokens=24, temperature=0, stop=[stop, "zzzz"])
    assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens < 24
    s = list(client.completions.create(model="", prompt=p, max_tokens=24, temperature=0, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in s) == cut
    assert s[-1].choices[0].finish_reason == "stop"


def test_seeded_sampling_is_reproducible(client):
    def gen(seed):
        return client.completions.create(model="", prompt="Once upon a time", max_tokens=24, temperature=1.0,
                                         seed=seed).choices[0].text
    a, b, c = gen(42), gen(42), gen(7)
    assert a == b
    assert a != c


def test_n_choices(client):
    r = client.chat.completions.create(model="", messages=[{"role": "user", "content": "Tell me a story."}],
                                       max_tokens=16, temperature=1.0, seed=5, n=2)
    assert [c.index for c in r.choices] == [0, 1]
    assert r.choices[0].message.content != r.choices[1].message.content
    r2 = client.chat.completions.create(model="", messages=[{"role": "user", "content": "Tell me a story."}],
                                        max_tokens=16, temperature=1.0, seed=5, n=2)
    assert [c.message.content for c in r2.choices] == [c.message.content for c in r.choices]
    assert r.usage.completion_tokens <= 32 and r.usage.prompt_tokens == r2.usage.prompt_tokens


def test_logprobs(client):
    r = client.chat.completions.create(model="", messages=[{"role": "user", "content": "Hi"}], max_tokens=6,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        tops = [a.logprob for a in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert t.logprob == tops[0] and t.token == t.top_logprobs[0].token  # greedy takes the most likely
        assert sum(2.718281828459045 ** x for x in tops) <= 1 + 1e-6
        assert bytes(t.bytes).decode() == t.token
    # the completions API's shape; the tokens spell the text
    c = client.completions.create(model="", prompt=PROMPTS[0], max_tokens=6, temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert "".join(lp.tokens) == c.choices[0].text
    assert len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    assert all(len(t) == 2 for t in lp.top_logprobs)
    assert lp.text_offset[0] == 0


# ---- batch invariance --------------------------------------------------------------


def test_greedy_among_15_concurrent(srv):
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(15)]
    want = {p: run_ids("--temp", 0, "-n", N, "-p", p) for p in prompts}

    def one(p):
        st, _, body = http_req(srv, "POST", "/v1/completions", {"prompt": p, "max_tokens": N, "temperature": 0,
                                                                 "return_token_ids": True})
        assert st == 200, body
        return json.loads(body)["choices"][0]["token_ids"]

    with concurrent.futures.ThreadPoolExecutor(15) as ex:
        got = dict(zip(prompts, ex.map(one, prompts)))
    assert got == want
    m = settled(srv)
    assert m["llmk_kv_blocks_used"] == 0
    assert m["llmk_kv_blocks_free"] + m["llmk_kv_blocks_cached"] == m["llmk_kv_blocks_total"] > 0
    assert m['llmk_requests_total{status="200"}'] >= 15
    assert m['llmk_time_to_first_token_seconds_bucket{le="+Inf"}'] >= 15
    assert m["llmk_generated_tokens_total"] >= 15


# ---- errors -------------------------------------------------------------------------


def test_bad_requests(srv, client):
    e = error_of(http_req(srv, "POST", "/v1/completions", b'{"prompt": "x",'), 400)
    assert "JSON" in e["message"]
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": "x", "temperature": "hot"}), 400, "temperature")
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 0}), 400, "max_tokens")
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": "x", "logit_bias": {"abc": 1}}), 400, "logit_bias")
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": "x", "stop": [1]}), 400, "stop")
    error_of(http_req(srv, "POST", "/v1/completions", {"max_tokens": 3}), 400, "prompt")
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": [99999999]}), 400, "prompt")
    error_of(http_req(srv, "POST", "/v1/chat/completions", {"messages": []}), 400, "messages")
    error_of(http_req(srv, "POST", "/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}),
             400, "messages")
    error_of(http_req(srv, "POST", "/v1/completions", b"[1, 2]"), 400)
    # a NUL escape would end the C string early: refused, not cut short (an escaped backslash is fine)
    e = error_of(http_req(srv, "POST", "/v1/completions", b'{"prompt": "a\\u0000b", "max_tokens": 1}'), 400)
    assert "NUL" in e["message"], e
    assert http_req(srv, "POST", "/v1/completions", b'{"prompt": "a\\\\u0000b", "max_tokens": 1}')[0] == 200
    error_of(http_req(srv, "POST", "/v1/completions", {"prompt": "word " * 1100}), 400, "prompt")  # > -c 1024
    with pytest.raises(openai.BadRequestError) as ex:
        client.completions.create(model="", prompt="x", top_p=3)
    assert ex.value.status_code == 400 and "top_p" in str(ex.value)
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="gpt-4", prompt="x", max_tokens=1)
    error_of(http_req(srv, "POST", "/v1/completions", {"model": "gpt-4", "prompt": "x"}), 404, "model")
    error_of(http_req(srv, "GET", "/v1/nothing"), 404)
    st, hdr, _ = http_req(srv, "GET", "/v1/completions")
    assert st == 405 and hdr["Allow"] == "POST"
    error_of(http_req(srv, "POST", "/health", b"{}"), 405)
    big = b'{"prompt": "' + b"a" * (8 << 20) + b'"}'
    error_of(http_req(srv, "POST", "/v1/completions", big), 413)
    # the server is still fine
    assert client.completions.create(model="", prompt="x", max_tokens=2, temperature=0).usage.completion_tokens


def test_client_gone_mid_stream_frees_its_sequence(srv):
    before = metrics(srv)["llmk_requests_cancelled_total"]
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    # end-of-generation banned: the request can only end by the client leaving (or its 900 tokens)
    conn.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 900,
                                                        "stream": True, "temperature": 1.0,
                                                        "logit_bias": {"0": -100, "2": -100}}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
    assert r.readline().startswith(b"data: ")
    conn.sock.shutdown(socket.SHUT_RDWR)  # the client is gone (close alone waits for the response's file)
    r.close()
    conn.close()
    m = settled(srv, lambda m: m["llmk_requests_cancelled_total"] > before)
    assert m["llmk_kv_blocks_used"] == 0
    assert m["llmk_generated_tokens_total"] < 900 * 2  # it did not run to the end


# ---- a server with a key, one slot and a short queue; draining -------------------------


@pytest.fixture(scope="module")
def small():
    s = Server("-np", 1, "--max-queue", 1, "-c", 512, "--api-key", "sekret", "--drain-timeout", 20)
    yield s
    s.stop()


def test_api_key(small):
    error_of(http_req(small, "GET", "/v1/models"), 401)
    error_of(http_req(small, "GET", "/v1/models", headers={"Authorization": "Bearer wrong"}), 401)
    with pytest.raises(openai.AuthenticationError):
        small.client("nope").models.list()
    assert small.client("sekret").models.list().data[0].id == MODEL.name
    assert http_req(small, "GET", "/health")[0] == 200  # open


def test_queue_full_is_429(small):
    auth = {"Authorization": "Bearer sekret"}

    def one(_):
        # no end of text: the running request outlasts the other four's arrival on any host
        return http_req(small, "POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 120,
                                                           "temperature": 1.0, "logit_bias": {"0": -100, "2": -100}},
                        auth)

    with concurrent.futures.ThreadPoolExecutor(5) as ex:
        res = list(ex.map(one, range(5)))
    codes = sorted(r[0] for r in res)
    assert 200 in codes and 429 in codes, codes
    for st, hdr, body in res:
        if st == 429:
            assert hdr["Retry-After"] == "1"
            assert json.loads(body)["error"]["code"] == "queue_full"


def test_sigterm_drains(small):
    auth = {"Authorization": "Bearer sekret"}
    conn = http.client.HTTPConnection("127.0.0.1", small.port, timeout=60)
    # The end-of-text tokens banned and the context's length asked for, so the
    # stream outlives the checks below on a fast host (150 tokens did not).
    conn.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 480,
                                                        "stream": True, "temperature": 1.0, "seed": 1,
                                                        "logit_bias": {"0": -100, "2": -100}}),
                 {"Content-Type": "application/json", **auth})
    r = conn.getresponse()
    assert r.status == 200
    first = r.readline()
    assert first.startswith(b"data: ")
    small.p.send_signal(signal.SIGTERM)
    for _ in range(100):  # the signal is taken within a few ms; poll rather than guess
        st, _, body = http_req(small, "GET", "/health")
        if st != 200:
            break
        time.sleep(0.01)
    assert st == 503 and json.loads(body) == {"status": "draining"}
    error_of(http_req(small, "POST", "/v1/completions", {"prompt": "x"}, auth), 503)
    rest = r.read().decode()  # the running stream finishes
    events = [line[6:] for line in (first.decode() + rest).splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["choices"][0]["finish_reason"] in ("stop", "length")
    assert small.stop() == 0
    assert "draining" in small.err()


@pytest.mark.skipif(not SAN_BIN or not Path(SAN_BIN).exists(), reason="no sanitizer build")
def test_sanitizer_build():
    s = Server("-np", 2, "-c", 256, binary=SAN_BIN)
    try:
        c = s.client()
        assert c.chat.completions.create(model="", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
                                         logprobs=True, top_logprobs=2, n=2, stop="\n").choices
        assert list(c.completions.create(model="", prompt="Hi", max_tokens=4, stream=True, seed=1,
                                         stream_options={"include_usage": True}))
        error_of(http_req(s, "POST", "/v1/completions", b'{"prompt": [1, "x"]}'), 400)
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", "/v1/completions", json.dumps({"prompt": "Hi", "max_tokens": 200, "stream": True}))
        conn.getresponse().readline()
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    finally:
        rc = s.stop()
    assert rc == 0 and "Sanitizer" not in s.err() and "runtime error" not in s.err(), s.err()


# ---- reasoning effort (gpt-oss's harmony template) ----------------------------

GPTOSS = ROOT / "tests" / "fixtures" / "model" / "tiny" / "tiny_gptoss.gguf"


def harmony_prompt_tokens(tmp_path, effort):
    """The prompt as `llmk template` renders it with that effort, counted by `llmk tokenize --special`."""
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps([{"role": "user", "content": "Hi there"}]))
    extra = ["--reasoning-effort", effort] if effort else []
    text = subprocess.run([BIN, "template", "-m", str(GPTOSS), "--messages", str(msgs), *extra],
                          capture_output=True, check=True).stdout
    ids = subprocess.run([BIN, "tokenize", "-m", str(GPTOSS), "--special", "--no-bos", "-f", "-"], input=text,
                         capture_output=True, check=True).stdout
    return len(json.loads(ids))


def test_reasoning_effort_reaches_the_template(tmp_path):
    """OpenAI's reasoning_effort (the official client's parameter) and
    chat_template_kwargs' (vLLM's, llama.cpp's) render harmony's
    "Reasoning: LEVEL": the prompt the server counts is the template's with
    that effort; another value is a 400 naming the parameter."""
    s = Server("-np", 1, "-c", 512, model=GPTOSS)
    try:
        c = s.client()
        msgs = [{"role": "user", "content": "Hi there"}]
        want = {e: harmony_prompt_tokens(tmp_path, e) for e in (None, "low", "high")}
        assert len(set(want.values())) > 1, want  # the levels tokenize differently here, so the check bites
        for e, n in want.items():
            kw = {"reasoning_effort": e} if e else {}
            r = c.chat.completions.create(model=GPTOSS.name, messages=msgs, max_tokens=1, temperature=0, **kw)
            assert r.usage.prompt_tokens == n, (e, r.usage)
        st, _, body = http_req(s, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 1,
                                                                   "chat_template_kwargs": {"reasoning_effort": "low"}})
        assert st == 200 and json.loads(body)["usage"]["prompt_tokens"] == want["low"], body
        error_of(http_req(s, "POST", "/v1/chat/completions", {"messages": msgs, "reasoning_effort": "max"}), 400,
                 "reasoning_effort")
        error_of(http_req(s, "POST", "/v1/chat/completions", {"messages": msgs, "chat_template_kwargs": [1]}), 400,
                 "chat_template_kwargs")
    finally:
        assert s.stop() == 0, s.err()


def test_harmony_answers_split_into_content_and_reasoning():
    """A harmony model's chat answer: content from the final (and commentary)
    channel, reasoning_content from the analysis channel, the markers and
    headers in neither. tests/test_chat.c checks the split on written
    replies. The tiny random model writes no markers on its own: first the
    plumbing (both fields present, the streamed deltas adding up to the
    whole answer, none on completions or for other templates), then a
    sampled answer steered onto the markers, split as an independent rule
    splits its token ids."""
    s = Server("-np", 1, "-c", 512, model=GPTOSS)
    try:
        body = {"messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 24, "temperature": 0,
                "return_token_ids": True}
        st, _, raw = http_req(s, "POST", "/v1/chat/completions", body)
        assert st == 200, raw
        msg = json.loads(raw)["choices"][0]["message"]
        assert isinstance(msg["reasoning_content"], str) and isinstance(msg["content"], str)
        st, _, raw = http_req(s, "POST", "/v1/chat/completions", dict(body, stream=True))
        deltas = [json.loads(l[6:]) for l in raw.decode().split("\n\n") if l.startswith("data: {")]
        got = {"content": "", "reasoning_content": ""}
        for d in deltas:
            for k in got:
                got[k] += d["choices"][0]["delta"].get(k) or "" if d["choices"] else ""
        assert got == {k: msg[k] for k in got}, (got, msg)
        st, _, raw = http_req(s, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 4})
        assert st == 200 and "reasoning_content" not in json.loads(raw)["choices"][0], raw
        # Steered onto the markers (test_gptoss.py's steer, the bias OpenAI's
        # range allows): the first seed whose ids hold an analysis and a final
        # message, split by test_gptoss's independent rule, whole and streamed.
        from test_gptoss import HARMONY_STEER, harmony_parts, harmony_pieces

        pieces = harmony_pieces()
        steered = dict(body, max_tokens=200, temperature=1, logit_bias={str(i): 40 for i in HARMONY_STEER})
        for seed in range(1, 200):
            st, _, raw = http_req(s, "POST", "/v1/chat/completions", dict(steered, seed=seed))
            assert st == 200, raw
            choice = json.loads(raw)["choices"][0]
            content, reasoning = harmony_parts(choice["token_ids"], pieces)
            if content and reasoning:
                break
        assert content and reasoning, "no seed gave an analysis and a final message"
        assert choice["message"]["content"] == content.decode()
        assert choice["message"]["reasoning_content"] == reasoning.decode()
        st, _, raw = http_req(s, "POST", "/v1/chat/completions", dict(steered, seed=seed, stream=True))
        got = {"content": "", "reasoning_content": ""}
        for d in [json.loads(l[6:]) for l in raw.decode().split("\n\n") if l.startswith("data: {")]:
            for k in got:
                got[k] += d["choices"][0]["delta"].get(k) or "" if d["choices"] else ""
        assert got == {"content": content.decode(), "reasoning_content": reasoning.decode()}, got
    finally:
        assert s.stop() == 0, s.err()


def test_no_reasoning_content_without_harmony(client):
    r = client.chat.completions.create(model=MODEL.name, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})
