"""llmk template (and the chat-template recognition behind llmk chat / run --chat)
against jinja2 renderings of each family's own template text
(tests/ref/make_chat_fixtures.py writes tests/fixtures/chat/*.json)."""
import json
import os
import subprocess

import gguf
import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures", "chat")
BIN = os.environ.get("LLMK_BIN", os.path.join(ROOT, "build", "llmk"))
DEFAULT_MODEL = os.path.join(os.environ.get("LLMK_MODELS", os.path.expanduser("~/.cache/llmk")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")
SETS = ["smollm2", "qwen2", "llama3", "zephyr", "llama2", "gemma3"]


def load(name):
    with open(os.path.join(FIX, name + ".json"), encoding="utf-8") as fh:
        return json.load(fh)


def run(*args, input_bytes=None, check=True):
    p = subprocess.run([BIN, *args], input=input_bytes, capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    return p


def tiny_gguf(path, template, bos, eos):
    """A GGUF holding only tokenizer metadata: all llmk template reads."""
    w = gguf.GGUFWriter(str(path), "llama")
    tokens = ["<unk>", bos or "<bos>", eos]
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    if bos:
        w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if template is not None:
        w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def render(model, case, tmp_path, extra=()):
    msgs = tmp_path / "messages.json"
    msgs.write_text(json.dumps(case["messages"], ensure_ascii=False), encoding="utf-8")
    args = ["template", "-m", model, "--messages", str(msgs), *extra]
    if not case["add_generation_prompt"]:
        args.append("--no-generation-prompt")
    return run(*args).stdout.decode("utf-8")


@pytest.mark.parametrize("name", SETS)
def test_template_matches_jinja(name, tmp_path):
    data = load(name)
    model = tiny_gguf(tmp_path / "t.gguf", data["template"], data["bos"], data["eos"])
    info = run("template", "-m", model, "--info").stdout.decode()
    assert f"template: {data['family']}" in info
    for case in data["cases"]:
        assert render(model, case, tmp_path) == case["rendered"], case["messages"]


@pytest.mark.parametrize("name", SETS)
def test_info_names_the_family(name, tmp_path):
    """llmk info names the family llmk's chat code recognises, as llmk run and chat use it."""
    data = load(name)
    model = tiny_gguf(tmp_path / "t.gguf", data["template"], data["bos"], data["eos"])
    info = run("info", model).stdout.decode()
    assert f"chat template: {data['family']} ({len(data['template'].encode())} bytes)" in info
    unknown = tiny_gguf(tmp_path / "u.gguf", "{{ no markers here }}", data["bos"], data["eos"])
    assert "chat template: present (21 bytes), not one llmk recognises" in run("info", unknown).stdout.decode()
    none = tiny_gguf(tmp_path / "n.gguf", None, data["bos"], data["eos"])
    assert "chat template: absent" in run("info", none).stdout.decode()


@pytest.mark.parametrize("name", ["llama3", "zephyr", "llama2", "gemma3"])
def test_override_by_name(name, tmp_path):
    """--chat-template NAME renders that family whatever the file's template says."""
    data = load(name)
    model = tiny_gguf(tmp_path / "t.gguf", "{{ no markers here }}", data["bos"], data["eos"])
    case = data["cases"][2]
    assert render(model, case, tmp_path, ["--chat-template", data["family"]]) == case["rendered"]


def test_default_model_text_and_ids(tmp_path):
    if not os.path.exists(DEFAULT_MODEL):
        pytest.skip("default model not present")
    data = load("smollm2")
    info = run("template", "-m", DEFAULT_MODEL, "--info").stdout.decode()
    assert "SmolLM" in info  # the default system prompt came from the file's template
    for case in data["cases"]:
        text = render(DEFAULT_MODEL, case, tmp_path)
        assert text == case["rendered"]
        f = tmp_path / "r.txt"
        f.write_bytes(text.encode("utf-8"))
        ids = json.loads(run("tokenize", "-m", DEFAULT_MODEL, "--special", "--no-bos", "-f",
                             str(f)).stdout)
        assert ids == case["ids"]


def test_refusals(tmp_path):
    unknown = tiny_gguf(tmp_path / "u.gguf", "{% for m in messages %}{{ m.content }}{% endfor %}",
                        "<s>", "</s>")
    msgs = tmp_path / "m.json"
    msgs.write_text('[{"role": "user", "content": "hi"}]')
    p = run("template", "-m", unknown, "--messages", str(msgs), check=False)
    assert p.returncode == 1 and b"llmk_template_unknown" in p.stderr
    assert b"--chat-template" in p.stderr
    none = tiny_gguf(tmp_path / "n.gguf", None, "<s>", "</s>")
    p = run("template", "-m", none, "--messages", str(msgs), check=False)
    assert p.returncode == 1 and b"no tokenizer.chat_template" in p.stderr
    p = run("template", "-m", unknown, "--messages", str(msgs), "--chat-template", "nope",
            check=False)
    assert p.returncode == 1 and b"nope" in p.stderr
    ok = tiny_gguf(tmp_path / "ok.gguf", load("zephyr")["template"], "<s>", "</s>")
    for bad in [b"[", b"{}", b'[{"role": "user"}]', b'[{"role": 3, "content": "x"}]', b"\xff\xfe",
                b"[" * 100000]:
        p = run("template", "-m", ok, input_bytes=bad, check=False)
        assert p.returncode == 1 and b"llmk_bad_request" in p.stderr, bad[:20]
    # Llama-2 requires alternating roles, as its template raises
    l2 = tiny_gguf(tmp_path / "l2.gguf", load("llama2")["template"], "<s>", "</s>")
    p = run("template", "-m", l2, input_bytes=b'[{"role":"user","content":"a"},'
            b'{"role":"user","content":"b"}]', check=False)
    assert p.returncode == 1 and b"alternate" in p.stderr
    # ... and so does Gemma's
    gm = tiny_gguf(tmp_path / "gm.gguf", load("gemma3")["template"], "<bos>", "<eos>")
    p = run("template", "-m", gm, input_bytes=b'[{"role":"system","content":"s"},'
            b'{"role":"assistant","content":"a"}]', check=False)
    assert p.returncode == 1 and b"alternate" in p.stderr


def tokenize_text(text, tmp_path):
    f = tmp_path / "t.txt"
    f.write_bytes(text.encode("utf-8"))
    return json.loads(run("tokenize", "-m", DEFAULT_MODEL, "--special", "--no-bos", "-f",
                          str(f)).stdout)


def verbose_turns(stderr):
    """{turn: {"reused", "prefilled", "ids", "generated", "evaluated", "why"}} from --verbose."""
    import re
    turns = {}
    for line in stderr.decode("utf-8", "replace").splitlines():
        m = re.match(r"llmk chat: turn (\d+): reused (\d+) tokens, prefilled (\d+) tokens", line)
        if m:
            turns.setdefault(int(m[1]), {}).update(reused=int(m[2]), prefilled=int(m[3]))
        m = re.match(r"llmk chat: turn (\d+) prompt ids: (\[.*\])", line)
        if m:
            turns.setdefault(int(m[1]), {})["ids"] = json.loads(m[2])
        m = re.match(r"llmk chat: turn (\d+): generated (\d+) tokens \((\d+) evaluated\), (.*)", line)
        if m:
            turns.setdefault(int(m[1]), {}).update(generated=int(m[2]), evaluated=int(m[3]),
                                                   why=m[4])
    return turns


@pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model not present")
def test_chat_two_turns_reuses_the_cache(tmp_path):
    save = tmp_path / "conv.json"
    p = run("chat", "-m", DEFAULT_MODEL, "--temp", "0", "-n", "16", "--verbose", "--save", str(save),
            input_bytes=b"Hi there\nWhat is 2+2?\n")
    turns = verbose_turns(p.stderr)
    assert set(turns) == {1, 2}, p.stderr
    t1, t2 = turns[1], turns[2]
    # Turn 1's prompt is token-identical to the jinja2 rendering tokenized by
    # the reference tokenizer (fixture case 0: one user turn, generation prompt).
    ref = load("smollm2")["cases"][0]
    assert ref["messages"] == [{"role": "user", "content": "Hi there"}] and ref["add_generation_prompt"]
    assert t1["ids"] == ref["ids"]
    assert t1["reused"] == 0 and t1["prefilled"] == len(t1["ids"])
    # Turn 2 prefills only what is new: everything in the cache is reused
    # (turn 1's prompt and the reply tokens that were fed back).
    assert t2["reused"] == len(t1["ids"]) + t1["evaluated"]
    assert t2["reused"] + t2["prefilled"] == len(t2["ids"])
    assert t2["ids"][:len(t1["ids"])] == t1["ids"]
    # The whole conversation's tokens are the tokenization of its template
    # rendering (byte-identical to jinja2, test_template_matches_jinja).
    conv = json.loads(save.read_text(encoding="utf-8"))
    assert [m["role"] for m in conv] == ["user", "assistant", "user", "assistant"]
    msgs = tmp_path / "m.json"
    msgs.write_text(json.dumps(conv[:3]), encoding="utf-8")
    text = run("template", "-m", DEFAULT_MODEL, "--messages", str(msgs)).stdout.decode()
    assert t2["ids"] == tokenize_text(text, tmp_path)
    # What was printed is what the conversation keeps.
    out = p.stdout.decode()
    assert out == conv[1]["content"] + "\n" + conv[3]["content"] + "\n"


@pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model not present")
def test_chat_ctrl_c_stops_the_reply_not_the_program(tmp_path):
    import select
    import signal
    import time
    err = open(tmp_path / "err.txt", "wb")
    # <|im_end|> (id 2) banned so a reply only ends when interrupted.
    p = subprocess.Popen([BIN, "chat", "-m", DEFAULT_MODEL, "--verbose", "--seed", "1", "-n",
                          "100000", "--ctx", "1024", "--logit-bias", "2=-inf"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    try:
        # Several tokens shown before Ctrl-C, so some of the reply was
        # evaluated whenever the signal lands (it may land right after a
        # token is shown, before that token is fed back).
        def wait_output(min_bytes=16):
            deadline = time.time() + 120
            got = b""
            while time.time() < deadline:
                r, _, _ = select.select([p.stdout], [], [], 1.0)
                if r:
                    got += os.read(p.stdout.fileno(), 65536)
                    if len(got) >= min_bytes:
                        return got
            raise AssertionError(f"no output (got {got!r})")

        def wait_err(needle):
            deadline = time.time() + 120
            while time.time() < deadline:
                if needle in (tmp_path / "err.txt").read_bytes():
                    return
                time.sleep(0.1)
            raise AssertionError(f"no {needle!r} on stderr")

        p.stdin.write(b"Tell me a story.\n")
        p.stdin.flush()
        wait_output()
        p.send_signal(signal.SIGINT)
        wait_err(b"turn 1: generated")
        p.stdin.write(b"Another one.\n")
        p.stdin.flush()
        wait_err(b"turn 2: reused")
        p.send_signal(signal.SIGINT)
        wait_err(b"turn 2: generated")
        p.stdin.close()
        assert p.wait(timeout=60) == 0
    finally:
        if p.poll() is None:
            p.kill()
        err.close()
    turns = verbose_turns((tmp_path / "err.txt").read_bytes())
    assert turns[1]["why"] == "interrupted" and turns[2]["why"] == "interrupted"
    # the interrupted reply is part of the conversation; at least turn 1's
    # prompt stays in the cache (the sampled reply's tokens need not be the
    # canonical tokenization of its text, so not necessarily all of it)
    assert turns[2]["reused"] >= len(turns[1]["ids"])
    assert turns[1]["evaluated"] >= 1


@pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model not present")
def test_chat_context_full():
    # A first turn that does not fit: a clear refusal, and the chat goes on
    # (here to the end of input), not a crash and not an exit.
    p = run("chat", "-m", DEFAULT_MODEL, "--ctx", "16", input_bytes=b"Hi there\n", check=False)
    assert p.returncode == 0
    assert b"llmk_context_full" in p.stderr and b"context holds 16" in p.stderr
    assert b"not sent" in p.stderr and p.stdout == b""
    # A reply that runs into the end of the context ends there, with a message.
    p = run("chat", "-m", DEFAULT_MODEL, "--ctx", "40", "--verbose", "--temp", "0", "-n", "100",
            "--logit-bias", "2=-inf", input_bytes=b"Hi there\n")
    turns = verbose_turns(p.stderr)
    assert turns[1]["why"] == "context full", p.stderr
    assert len(turns[1]["ids"]) + turns[1]["evaluated"] == 40
    assert b"context of 40 tokens is full" in p.stderr


@pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model not present")
def test_chat_prompt_matches_jinja_for_longer_conversations(tmp_path):
    """Conversations from the fixtures (system + user; user/assistant/user),
    the earlier turns loaded with --messages and the last typed in: the
    prompt chat prefills is token-identical to the jinja2 rendering
    tokenized by the reference tokenizer."""
    cases = [c for c in load("smollm2")["cases"]
             if c["add_generation_prompt"] and len(c["messages"]) in (2, 3)
             and "\n" not in c["messages"][-1]["content"]]
    assert len(cases) == 2
    for case in cases:
        hist = tmp_path / "h.json"
        hist.write_text(json.dumps(case["messages"][:-1]), encoding="utf-8")
        p = run("chat", "-m", DEFAULT_MODEL, "--temp", "0", "-n", "1", "--verbose", "--messages",
                str(hist), input_bytes=case["messages"][-1]["content"].encode() + b"\n")
        assert verbose_turns(p.stderr)[1]["ids"] == case["ids"], case["messages"]
