"""Issue 20, the first five minutes: `llmk run -p` answers through the model's
chat template (ending at the end of the turn) when it has one, and --raw
continues the text and echoes it as llama-cli does."""
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
