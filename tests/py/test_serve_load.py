"""`llmk serve` under load (issue 18): many concurrent streaming clients, some
of which hang up mid-stream, against one real server.

64 client threads share a fixed number of requests (chat and completions,
greedy and seeded sampling, varied prompts and lengths); about a fifth of
them shut their socket down at a random point of the stream (before the
answer's headers, or after some events), as the client-gone test in
test_serve.py does. Asserted: every request that was read to its end was a
200 with a well-formed SSE stream (each `data:` line one JSON chunk of the
request's id, one finish, usage last, then `data: [DONE]`), and a greedy
stream's concatenated deltas are exactly the whole (non-streamed) answer
to the same request; nothing answered 5xx; and afterwards /metrics shows the
server idle again: no sequence running or queued, no KV block held, every
block free or cached, and no connection left open but the scrape's own.

LLMK_SERVE_BIN runs it against another binary; LLMK_SAN_BIN, when set, also
gets a smaller run (16 clients) of its own."""
import http.client
import json
import random
import socket
import threading
import time
from pathlib import Path

import pytest

from test_serve import MODEL, SAN_BIN, SERVE_BIN, Server, http_req, metrics, settled

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")

PROMPTS = ["The capital of France is", "Hello", "Write a list of three fruits:\n1.", "def fibonacci(n):",
           "Once upon a time", "The ocean is", "My favourite recipe is", "Translate to French: good morning",
           "The lighthouse keeper climbed the spiral stairs every evening, counting the steps. One night a ship"]


def plan(total, seed):
    """The requests: (path, body, hang_up) with hang_up None (read to the end),
    0 (right after sending) or k (after k events)."""
    rng = random.Random(seed)
    out = []
    for i in range(total):
        p = PROMPTS[i % len(PROMPTS)]
        chat = i % 3 == 0
        body = {"max_tokens": rng.randint(16, 48), "stream": True, "stream_options": {"include_usage": True}}
        if i % 2:
            body.update(temperature=1.0, seed=i)
        else:
            body["temperature"] = 0
        if chat:
            body["messages"] = [{"role": "user", "content": p}]
        else:
            body["prompt"] = p
        hang_up = rng.randint(0, 6) if rng.random() < 0.2 else None
        out.append(("/v1/chat/completions" if chat else "/v1/completions", body, hang_up))
    return out


def stream(port, path, body, hang_up):
    """One streaming request: ("gone", None) for a client that hung up, else
    (status, events) with the `data:` payloads read to the end."""
    # a request queued behind the others waits for its first byte: minutes under ASan on a busy machine
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        if hang_up == 0:
            conn.sock.shutdown(socket.SHUT_RDWR)
            return "gone", None
        r = conn.getresponse()
        if r.status != 200:
            return r.status, [r.read().decode(errors="replace")]
        events = []
        for raw in r:
            line = raw.decode().rstrip("\n")
            if line.startswith("data: "):
                events.append(line[6:])
                if hang_up is not None and len(events) >= hang_up:
                    conn.sock.shutdown(socket.SHUT_RDWR)  # gone mid-stream (close alone would wait)
                    return "gone", None
            else:
                assert line == "", line  # SSE: a data line, then an empty one
        return 200, events
    finally:
        conn.close()


def check_stream(path, body, events):
    """The events of one whole stream; returns its text."""
    assert events and events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]  # every data line but the last is one JSON object
    chat = path.endswith("chat/completions")
    usage = chunks.pop()
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] <= body["max_tokens"], usage
    assert len({c["id"] for c in chunks + [usage]}) == 1
    text, fins = "", []
    for c in chunks:
        assert c["object"] == ("chat.completion.chunk" if chat else "text_completion"), c
        (ch,) = c["choices"]
        assert ch["index"] == 0
        text += (ch["delta"].get("content") or "") if chat else ch["text"]
        if ch["finish_reason"]:
            fins.append(ch["finish_reason"])
    assert len(fins) == 1 and fins[0] in ("stop", "length") and chunks[-1]["choices"][0]["finish_reason"], fins
    if fins[0] == "length":
        assert usage["usage"]["completion_tokens"] == body["max_tokens"], usage
    return text


def whole_text(srv, path, body):
    b = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    st, _, raw = http_req(srv, "POST", path, b)
    assert st == 200, raw
    c = json.loads(raw)["choices"][0]
    return c["message"]["content"] if "message" in c else c["text"]


def idle(srv, before):
    """Waits for the server to be idle again: sequences, KV blocks and
    connections back where they were before the load."""
    def back(m):
        return m["llmk_kv_blocks_used"] == 0 and \
            m["llmk_http_connections_open"] == before["llmk_http_connections_open"]
    m = settled(srv, back, timeout=30)
    assert m["llmk_kv_blocks_free"] + m["llmk_kv_blocks_cached"] == m["llmk_kv_blocks_total"] > 0
    return m


def load(srv, clients, total, seed):
    reqs = plan(total, seed)
    # The whole answers the greedy streams must spell, one per distinct request.
    want = {}
    for path, body, hang_up in reqs:
        key = json.dumps([path, body], sort_keys=True)
        if hang_up is None and body["temperature"] == 0 and key not in want:
            want[key] = whole_text(srv, path, body)
    before = idle(srv, metrics(srv))
    assert before["llmk_http_connections_open"] == 1  # the scrape itself
    results = [None] * total
    nxt = iter(range(total))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next(nxt, None)
            if i is None:
                return
            try:
                results[i] = stream(srv.port, *reqs[i])
            except Exception as e:  # reported below with the request
                results[i] = ("raised", repr(e))

    # Scrapes during the load: the gauges must move, or "back to idle" says nothing.
    peak = {"llmk_http_connections_open": 0, "llmk_sequences_running": 0, "llmk_kv_blocks_used": 0}
    done = threading.Event()

    def watch():
        while not done.wait(0.1):
            m = metrics(srv)
            for k in peak:
                peak[k] = max(peak[k], m[k])

    t0 = time.time()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    watcher = threading.Thread(target=watch)
    for t in threads + [watcher]:
        t.start()
    for t in threads:
        t.join(timeout=900)
    elapsed = time.time() - t0
    done.set()
    watcher.join()
    assert not any(t.is_alive() for t in threads)
    assert peak["llmk_http_connections_open"] > clients // 2, peak
    assert peak["llmk_sequences_running"] > 1 and peak["llmk_kv_blocks_used"] > 0, peak

    gone = 0
    for (path, body, hang_up), (st, events) in zip(reqs, results):
        if st == "gone":
            gone += 1
            continue
        assert st == 200, (path, body, st, events)
        text = check_stream(path, body, events)
        key = json.dumps([path, body], sort_keys=True)
        if key in want:
            assert text == want[key], (path, body)
    assert gone >= total // 10, gone
    after = idle(srv, before)
    assert not any(k.startswith('llmk_requests_total{status="5') and v > before.get(k, 0) for k, v in after.items())
    assert after['llmk_requests_total{status="200"}'] - before['llmk_requests_total{status="200"}'] >= total
    assert after["llmk_requests_cancelled_total"] > before["llmk_requests_cancelled_total"]
    print(f"load: {clients} clients, {total} requests ({gone} hung up) in {elapsed:.1f} s; "
          f"peak {peak}; {after['llmk_generated_tokens_total'] - before['llmk_generated_tokens_total']:.0f} tokens")
    # still serving
    assert whole_text(srv, "/v1/completions", {"prompt": "Hi", "max_tokens": 2, "temperature": 0}) is not None


@pytest.mark.slow
def test_load_64_streaming_clients():
    s = Server("-np", 8, "-c", 512, "--max-queue", 128)
    try:
        load(s, 64, 128, seed=18)
    finally:
        rc = s.stop()
    assert rc == 0, s.err()
    assert "Sanitizer" not in s.err() and "runtime error" not in s.err(), s.err()


@pytest.mark.slow
@pytest.mark.skipif(not SAN_BIN or not Path(SAN_BIN).exists(), reason="no sanitizer build")
def test_load_sanitizer_build():
    s = Server("-np", 4, "-c", 256, "--max-queue", 64, binary=SAN_BIN)
    try:
        load(s, 16, 32, seed=7)
    finally:
        rc = s.stop()
    assert rc == 0, s.err()
    assert "Sanitizer" not in s.err() and "runtime error" not in s.err(), s.err()
