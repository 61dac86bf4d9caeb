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
SETS = ["smollm2", "qwen2", "llama3", "zephyr", "llama2"]


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


@pytest.mark.parametrize("name", ["llama3", "zephyr", "llama2"])
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
