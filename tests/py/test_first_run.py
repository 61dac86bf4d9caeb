"""Issue 20, the first five minutes: `llmk run -p` answers through the model's
chat template (ending at the end of the turn) when it has one, --raw continues
the text and echoes it as llama-cli does, and llama.cpp's spellings work:
-f, -p -, -e, -n -1, -s, --ctx-size, -cnv / -i, --log-disable, --version."""
import json
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLMK = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY = ROOT / "tests" / "fixtures" / "model" / "tiny" / "tiny_qwen2.gguf"  # no chat template
QUESTION = "What is the capital of France? Answer in one sentence."
IM_END = 2  # SmolLM2's <|im_end|>, its end of turn

needs_model = pytest.mark.skipif(not MODEL.exists(), reason=f"default model {MODEL} not present")


def llmk(*args, stdin=None):
    return subprocess.run([LLMK, *map(str, args)], capture_output=True, text=True, input=stdin, timeout=300)


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def ids(*args, stdin=None):
    return json.loads(ok(llmk("run", "--print-ids", "--temp", 0, "-t", 2, *args, stdin=stdin)).stdout)


@needs_model
def test_run_answers_through_the_chat_template():
    got = ids("-m", MODEL, "-p", QUESTION, "-n", 64)
    assert got == ids("-m", MODEL, "--chat", "-p", QUESTION, "-n", 64)  # the default is --chat
    assert got[-1] == IM_END and len(got) < 64  # a whole answer, ended by the end of the turn
    assert got != ids("-m", MODEL, "--raw", "-p", QUESTION, "-n", 64)
    assert ids("-m", MODEL, "--no-chat", "-p", QUESTION, "-n", 8) == ids("-m", MODEL, "--raw", "-p", QUESTION, "-n", 8)
    r = ok(llmk("run", "-m", MODEL, "-p", QUESTION, "-n", 64, "--temp", 0, "-t", 2, "--verbose"))
    assert "Paris" in r.stdout and not r.stdout.startswith(QUESTION)  # an answer, the question not echoed
    assert "chat template chatml" in r.stderr


@needs_model
def test_raw_echoes_the_prompt_unless_told_not_to():
    prompt = "The capital of France is"
    echo = ok(llmk("run", "-m", MODEL, "--raw", "-p", prompt, "-n", 8, "--temp", 0, "-t", 2)).stdout
    bare = ok(llmk("run", "-m", MODEL, "--raw", "--no-display-prompt", "-p", prompt, "-n", 8, "--temp", 0,
                   "-t", 2)).stdout
    assert echo == prompt + bare and bare.strip()


def test_no_template_means_plain_completion():
    # the tiny model has no chat template: -p continues the text, as --raw
    assert ids("-m", TINY, "-p", "hello world", "-n", 4) == ids("-m", TINY, "--raw", "-p", "hello world", "-n", 4)
    r = ok(llmk("run", "-m", TINY, "-p", "hello world", "-n", 4, "--temp", 0, "-v"))
    assert r.stdout.startswith("hello world") and "plain completion" in r.stderr


@needs_model
def test_chat_flags_and_raw_exclude_each_other():
    for extra in (["--chat"], ["--system", "S"], ["--chat-template", "chatml"]):
        r = llmk("run", "-m", MODEL, "--raw", "-p", "x", *extra)
        assert r.returncode == 2 and "--raw excludes" in r.stderr, r.stderr


@needs_model
def test_prompt_from_a_file_and_stdin(tmp_path):
    want = ids("-m", MODEL, "--raw", "-p", "Once upon a time", "-n", 6)
    f = tmp_path / "p.txt"
    f.write_text("Once upon a time\n")  # one final newline is dropped, as llama-cli -f
    assert ids("-m", MODEL, "--raw", "-f", f, "-n", 6) == want
    assert ids("-m", MODEL, "--raw", "--file", f, "-n", 6) == want
    assert ids("-m", MODEL, "--raw", "-f", "-", "-n", 6, stdin="Once upon a time\n") == want
    assert ids("-m", MODEL, "--raw", "-p", "-", "-n", 6, stdin="Once upon a time") == want
    r = llmk("run", "-m", MODEL, "-f", tmp_path / "absent.txt")
    assert r.returncode == 1 and "llmk_io_error" in r.stderr and "absent.txt" in r.stderr
    r = llmk("run", "-m", MODEL, "-p", "x", "-f", f)
    assert r.returncode == 2 and "exclude each other" in r.stderr
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"a\0b")
    r = llmk("run", "-m", MODEL, "-f", nul)
    assert r.returncode == 1 and "NUL" in r.stderr


@needs_model
def test_escapes():
    want = ids("-m", MODEL, "--raw", "-p", "Line one\nLine 'two'\t\\", "-n", 4)
    assert ids("-m", MODEL, "--raw", "-e", "-p", r"Line one\nLine \'two\'\t\\", "-n", 4) == want
    assert ids("-m", MODEL, "--raw", "--escape", "-p", r"Line one\x0aLine 'two'\x09\\", "-n", 4) == want
    # without -e the backslashes are text
    assert ids("-m", MODEL, "--raw", "-p", r"Line one\nLine 'two'\t\\", "-n", 4) != want


@needs_model
def test_n_minus_one_fills_the_context():
    # the end of generation banned, -n -1 generates until the context is full:
    # the prompt's tokens, then one per position left, plus the last token chosen
    ban = ["--logit-bias", f"{IM_END}=-inf", "--logit-bias", "0=-inf"]
    r = ok(llmk("run", "-m", MODEL, "--raw", "-p", "Once upon a time", "-n", -1, "-c", 24, "--temp", 0, "-t", 2,
                "--print-ids", "-v", *ban))
    n_prompt = int(re.search(r"plain completion of the prompt, (\d+) tokens", r.stderr).group(1))
    assert len(json.loads(r.stdout)) == 24 - n_prompt + 1
    assert ids("-m", MODEL, "-p", QUESTION, "--n-predict", -1)[-1] == IM_END  # or until the end of the turn
    assert llmk("run", "-n", -2, "-p", "x").returncode == 2


@needs_model
def test_short_seed_and_ctx_size_are_the_same_options():
    flat = ["--raw", "-p", "Once upon a time", "-n", 6, "--temp", 1.5, "--top-k", 0, "--top-p", 1, "--min-p", 0]
    assert ids("-m", MODEL, *flat, "-s", 7) == ids("-m", MODEL, *flat, "--seed", 7)
    a = ok(llmk("run", "-m", MODEL, "-p", "Hi", "-n", 2, "--ctx-size", 40, "--temp", 0, "-v"))
    assert ok(llmk("run", "-m", MODEL, "-p", "Hi", "-n", 2, "-c", 40, "--temp", 0, "-v")).stdout == a.stdout
    r = llmk("run", "-m", MODEL, "-p", "Hi", "-n", 2, "--ctx-size", 3)
    assert r.returncode == 1 and "llmk_context_full" in r.stderr  # the chat prompt is longer than 3


@needs_model
def test_log_disable_and_verbose():
    r = ok(llmk("run", "-m", MODEL, "-p", "Hi", "-n", 4, "--log-disable"))  # a random seed: reported, unless
    assert r.stderr == "" and r.stdout.strip()
    r = ok(llmk("run", "-m", MODEL, "-p", "Hi", "-n", 4))
    assert re.search(r"^llmk run: seed \d+$", r.stderr, re.M) and "tok/s" in r.stderr
    r = ok(llmk("chat", "-m", MODEL, "-n", 4, "--log-disable", "--verbose", stdin="Hi\n"))
    assert r.stderr == "" and r.stdout.strip()


@needs_model
def test_conversation_runs_chat():
    chat = ok(llmk("chat", "-m", MODEL, "--system", "You are terse.", "-n", 12, "--temp", 0, "-t", 2,
                   stdin="Hi\nWho are you?\n"))
    for flag in ("-cnv", "--conversation", "-i", "--interactive"):
        r = ok(llmk("run", "-m", MODEL, flag, "-p", "You are terse.", "-n", 12, "--temp", 0, "-t", 2,
                    stdin="Hi\nWho are you?\n"))
        assert r.stdout == chat.stdout and r.stdout.strip(), flag
    r = ok(llmk("run", "-m", MODEL, "-cnv", "--prompt=You are terse.", "-n", 12, "--temp", 0, "-t", 2,
                stdin="Hi\nWho are you?\n"))
    assert r.stdout == chat.stdout
    r = llmk("run", "-m", MODEL, "-cnv", "--print-ids")
    assert r.returncode == 2 and "--conversation runs llmk chat" in r.stderr


def test_version():
    top = ok(llmk("--version")).stdout
    assert re.fullmatch(r"llmk \d+\.\d+\.\d+\n", top)
    for cmd in ("run", "chat", "batch", "serve", "info", "perplexity", "bench", "quantize"):
        r = llmk(cmd, "--version")
        assert r.returncode == 0 and r.stdout == top and r.stderr == "", (cmd, r.stderr)
        assert "--version" in llmk(cmd, "-h").stdout
    r = llmk("run", "--version=1")
    assert r.returncode == 2 and "takes no value" in r.stderr
