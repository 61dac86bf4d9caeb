"""`llmk batch` (issue 17): many requests on the continuous-batching engine.

Every request's tokens and text are those `llmk run` gives for it alone
(greedy, seeded sampling, chat messages), whatever runs beside it: -P 1 and
-P 4, small prefill chunks, a shared prompt prefix, a KV pool small enough to
force preemption. Outputs come in input order with their index and id. A bad
line fails the whole command before anything is generated, naming the line,
and leaves an existing output file as it was."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
SAN_BIN = os.environ.get("LLMK_SAN_BIN")
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")

N = 12
# ~150 tokens: two prompts share more than one KV block (128 positions).
LONG = ("The lighthouse keeper climbed the spiral stairs every evening, counting the steps "
        "as his father had taught him, and lit the great lamp before the sun went down. " * 5)
PROMPTS = [
    LONG + "One night a ship",
    "Hello",
    "The capital of France is",
    "Write a list of three fruits:\n1.",
    "def fibonacci(n):",
    LONG + "The keeper's daughter",
]
EOG = (0, 2)  # the default model's end-of-generation ids: <|endoftext|>, <|im_end|>
EOG_BAN = [a for i in EOG for a in ("--logit-bias", f"{i}=-inf")]


def llmk(*args, binary=BIN, input=None):
    return subprocess.run([binary, *map(str, args)], capture_output=True, timeout=300, input=input)


def ok(r):
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


# A batch "prompt" line is plain completion: `llmk run --raw` (run formats -p
# with the chat template by default), without the echo of the prompt;
# "--chat" compares a "messages" line with run's chat formatting.
def raw_unless_chat(args):
    return args if "--chat" in args else ("--raw", "--no-display-prompt", *args)


def run_ids(*args):
    return json.loads(ok(llmk("run", "-m", MODEL, "--print-ids", *raw_unless_chat(args))).stdout)


def run_text(*args):
    out = ok(llmk("run", "-m", MODEL, *raw_unless_chat(args))).stdout.decode()
    assert out.endswith("\n")
    return out[:-1]


def write_lines(path, objs):
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return path


def batch(path, *args, binary=BIN):
    r = ok(llmk("batch", "-m", MODEL, "-f", path, *args, binary=binary))
    return [json.loads(line) for line in r.stdout.decode().splitlines()], r.stderr.decode()


def stats(err):
    m = re.search(r"(\d+) requests, prompt (\d+) tokens \((\d+) cached\), generated (\d+) tokens, "
                  r"(\d+) preemptions", err)
    assert m, err
    return dict(zip(["requests", "prompt", "cached", "generated", "preemptions"], map(int, m.groups())))


@pytest.fixture(scope="module")
def greedy_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("batch")
    objs = [{"prompt": p, "id": f"req-{i}"} for i, p in enumerate(PROMPTS)]
    objs[2]["id"] = {"n": 2, "tags": ["x"]}  # any JSON value is echoed
    del objs[4]["id"]                        # no id: none in the output
    return write_lines(d / "greedy.jsonl", objs), objs


@pytest.fixture(scope="module")
def greedy_p4(greedy_file):
    return batch(greedy_file[0], "-P", 4, "-n", N, "--temp", 0)


def test_greedy_matches_run_in_input_order(greedy_file, greedy_p4):
    objs = greedy_file[1]
    out, err = greedy_p4
    assert [o["index"] for o in out] == list(range(len(PROMPTS)))
    for o, req in zip(out, objs):
        if "id" in req:
            assert o["id"] == req["id"]
        else:
            assert "id" not in o
        p = req["prompt"]
        ids = run_ids("--temp", 0, "-n", N, "-p", p)
        assert o["token_ids"] == ids, p
        assert o["text"] == run_text("--temp", 0, "-n", N, "-p", p), p
        assert o["completion_tokens"] == len(ids)
        assert o["finish_reason"] == ("stop" if ids[-1] in EOG else "length")
        assert len(ids) == N or ids[-1] in EOG
        assert "seed" not in o  # greedy
    assert out[1]["prompt_tokens"] < out[0]["prompt_tokens"]
    s = stats(err)
    assert s["requests"] == len(PROMPTS)
    assert s["generated"] == sum(len(o["token_ids"]) for o in out)
    assert "6/6 requests" in err  # the progress line at the end


def test_batch_invariance(greedy_file, greedy_p4):
    path = greedy_file[0]
    p1, err1 = batch(path, "-P", 1, "-n", N, "--temp", 0)
    assert p1 == greedy_p4[0]
    # one request at a time: the second long prompt starts on the first one's cached block
    assert stats(err1)["cached"] >= 128
    chunked, _ = batch(path, "-P", 3, "--step-tokens", 8, "-n", N, "--temp", 0)
    assert chunked == p1


def test_output_file_and_stdin(greedy_file, greedy_p4, tmp_path):
    out = tmp_path / "out.jsonl"
    r = ok(llmk("batch", "-m", MODEL, "-f", "-", "-o", out, "-P", 4, "-n", N, "--temp", 0,
                input=greedy_file[0].read_bytes()))
    assert r.stdout == b""
    assert [json.loads(line) for line in out.read_text().splitlines()] == greedy_p4[0]


def test_messages_line_matches_run_chat(tmp_path):
    q = "What is the capital of France?"
    path = write_lines(tmp_path / "chat.jsonl", [
        {"messages": [{"role": "user", "content": q}], "id": 1, "max_tokens": 16},
        {"prompt": q, "max_tokens": 16},
    ])
    out, _ = batch(path, "--temp", 0, "-P", 2)
    assert out[0]["token_ids"] == run_ids("--temp", 0, "-n", 16, "--chat", "-p", q)
    assert out[0]["text"] == run_text("--temp", 0, "-n", 16, "--chat", "-p", q)
    assert out[0]["prompt_tokens"] > out[1]["prompt_tokens"]  # the template's turn markers
    assert out[1]["token_ids"] == run_ids("--temp", 0, "-n", 16, "-p", q)


def test_seeded_sampling_is_per_request(tmp_path):
    p = "Once upon a time"
    path = write_lines(tmp_path / "seeded.jsonl", [
        {"prompt": "The capital of France is"},
        {"prompt": p, "temperature": 0.8, "seed": 7},
        {"prompt": "Hello", "max_tokens": 4},
        {"prompt": p, "temperature": 0.8, "seed": 7, "top_k": 0, "top_p": 1, "min_p": 0},
    ])
    a, _ = batch(path, "-P", 1, "-n", N, "--temp", 0)
    b, _ = batch(path, "-P", 4, "-n", N, "--temp", 0)
    assert a == b
    assert a[1]["seed"] == 7 and "seed" not in a[0]
    assert a[1]["token_ids"] == run_ids("--temp", 0.8, "--seed", 7, "-n", N, "-p", p)
    assert a[3]["token_ids"] == run_ids("--temp", 0.8, "--seed", 7, "--top-k", 0, "--top-p", 1,
                                        "--min-p", 0, "-n", N, "-p", p)
    assert a[2]["completion_tokens"] <= 4


def test_stop_token_ids(tmp_path, greedy_p4):
    ids = greedy_p4[0][2]["token_ids"]  # "The capital of France is", greedy
    stop = ids[2]
    k = ids.index(stop)  # where it first comes
    path = write_lines(tmp_path / "stop.jsonl", [{"prompt": PROMPTS[2], "stop_token_ids": [stop]}])
    out, _ = batch(path, "-n", N, "--temp", 0)
    assert out[0]["token_ids"] == ids[:k + 1]
    assert out[0]["finish_reason"] == "stop"
    # the stop token is counted and listed, its text is not in "text"
    assert out[0]["completion_tokens"] == k + 1
    assert out[0]["text"] == run_text("--temp", 0, "-n", k, "-p", PROMPTS[2])


def test_preemption_keeps_every_request_exact(tmp_path):
    # Four prompts of ~113 tokens, 30 tokens each: each request needs 2 KV
    # blocks once past 128 positions. A pool of 5 blocks holds the four
    # prompts (one block each) and one second block, so the second request
    # to cross 128 must preempt another.
    filler = " It was a long day and everyone was tired, but the work had to be finished before night fell."
    starts = ["The history of the river valley begins with", "A recipe for a simple loaf of bread needs",
              "In the year of the great storm, the villagers", "Notes on the design of small sailing boats:"]
    path = write_lines(tmp_path / "pre.jsonl",
                       [{"prompt": s + filler * (5 + i % 2), "id": i} for i, s in enumerate(starts)])
    small, err = batch(path, "-P", 4, "--kv-blocks", 5, "-n", 30, "--temp", 0, *EOG_BAN)
    s = stats(err)
    assert s["preemptions"] > 0, err
    alone, _ = batch(path, "-P", 1, "-n", 30, "--temp", 0, *EOG_BAN)
    assert small == alone
    assert all(o["completion_tokens"] == 30 for o in small)


@pytest.mark.parametrize("lines,args,words", [
    (['{"prompt": "a"}', '{"prompt": "b"}', 'not json'], [], ["line 3", "not valid JSON"]),
    (['{"prompt": "a"}', '', '{"id": 5}'], [], ["line 3", '"prompt"', '"messages"']),
    (['{"prompt": "a", "max_tokens": 0}'], [], ["line 1", "max_tokens", "got 0"]),
    (['{"prompt": "a", "messages": []}'], [], ["line 1", "both"]),
    (['{"prompt": ["a"]}'], [], ["line 1", "must be a string"]),
    (['{"prompt": "a", "max_token": 5}'], [], ["line 1", 'unknown field "max_token"']),
    (['{"prompt": "a", "temperature": "hot"}'], [], ["line 1", "temperature"]),
    (['{"prompt": "a", "stop_token_ids": [1, 99999999]}'], [], ["line 1", "stop_token_ids"]),
    (['{"messages": [{"role": "user"}]}'], [], ["line 1", "messages[0]"]),
    (['{"prompt": "a"}', '{"prompt": "' + "word " * 40 + '"}'], ["--ctx", 16],
     ["llmk_context_full", "line 2", "prompt has", "context of 16"]),
    (['{"prompt": "a", "max_tokens": 500}'], ["--ctx", 1024, "--kv-blocks", 2],
     ["llmk_cache_capacity_exceeded", "line 1", "the pool has 2"]),
])
def test_bad_input_fails_before_generating(tmp_path, lines, args, words):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("previous results\n")
    r = llmk("batch", "-m", MODEL, "-f", path, "-o", out, "-n", 4, "--temp", 0, *args)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.startswith("llmk batch: error: "), err
    for w in words:
        assert w in err, (w, err)
    assert "requests," not in err  # nothing was generated
    assert out.read_text() == "previous results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "out.jsonl"]


def test_nan_weights_fail_the_command(tmp_path):
    # A NaN block scale in a layer's weights (as tests/py/test_nan_weights.py):
    # the engine ends the step's requests with an error; the command names a
    # line and the evaluation's message, exits 1 and writes no output file.
    import gguf

    t = next(t for t in gguf.GGUFReader(str(MODEL)).tensors if t.name == "blk.4.ffn_up.weight")
    bad = tmp_path / "nan.gguf"
    data = bytearray(MODEL.read_bytes())
    off = int(t.data_offset) + 100 * 20  # block 100 of a Q4_1 tensor: its f16 scale
    data[off:off + 2] = (0x7E00).to_bytes(2, "little")
    bad.write_bytes(bytes(data))
    path = write_lines(tmp_path / "r.jsonl", [{"prompt": "Hello"}, {"prompt": PROMPTS[2]}])
    out = tmp_path / "out.jsonl"
    r = llmk("batch", "-m", bad, "-f", path, "-o", out, "-n", 4)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "error: llmk_nan_input" in err and "line 1: generation failed" in err and "blk.4" in err, err
    assert not out.exists()


def test_missing_file_and_usage(tmp_path):
    r = llmk("batch", "-m", MODEL, "-f", tmp_path / "nope.jsonl")
    assert r.returncode == 1 and b"nope.jsonl" in r.stderr, r.stderr
    r = llmk("batch", "-m", MODEL)
    assert r.returncode == 2 and b"-f FILE" in r.stderr, r.stderr
    r = llmk("batch", "-m", MODEL, "-f", tmp_path / "x", "-P", 0)
    assert r.returncode == 2, r.stderr


def test_empty_input_is_no_work(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n  \n")
    out, err = batch(path)
    assert out == [] and stats(err)["requests"] == 0


@pytest.mark.skipif(not SAN_BIN or not Path(SAN_BIN).exists(), reason="no sanitizer build")
def test_sanitizer_build(tmp_path):
    path = write_lines(tmp_path / "san.jsonl", [
        {"prompt": PROMPTS[0], "max_tokens": 6}, {"prompt": PROMPTS[5], "max_tokens": 6, "temperature": 0.8},
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6}, {"prompt": "Hello", "id": [1]},
    ])
    out, err = batch(path, "-P", 2, "-n", 6, "--kv-blocks", 3, binary=SAN_BIN)
    assert len(out) == 4
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a"}\n{"prompt": 1}\n')
    r = llmk("batch", "-m", MODEL, "-f", bad, binary=SAN_BIN)
    assert r.returncode == 1 and b"line 2" in r.stderr, r.stderr
