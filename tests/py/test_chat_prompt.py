"""llmk chat as a person uses it: in a real terminal (pexpect's pty), so
libedit edits the line and keeps the history, plus the slash commands,
backslash continuation, and a context that fills up and keeps going.
What the model received is checked through /save's JSON, not the screen."""
import json
import os
import subprocess

import pexpect
import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BIN = os.environ.get("LLMK_BIN", os.path.join(ROOT, "build", "llmk"))
DEFAULT_MODEL = os.path.join(os.environ.get("LLMK_MODELS", os.path.expanduser("~/.cache/llmk")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")
LEFT, UP = "\x1b[D", "\x1b[A"

pytestmark = pytest.mark.skipif(not os.path.exists(DEFAULT_MODEL), reason="default model not present")


def spawn(tmp_path, *extra):
    # HOME in tmp_path: no ~/.editrc of the machine changes the key bindings.
    env = dict(os.environ, TERM="xterm", HOME=str(tmp_path))
    p = pexpect.spawn(BIN, ["chat", "-m", DEFAULT_MODEL, "--temp", "0", "-n", "6", "--log-disable", *extra],
                      env=env, encoding="utf-8", timeout=30, dimensions=(24, 200))
    p.expect_exact("> ")
    return p


def line(p, text, then="> "):
    """Types text and Enter, and waits for what follows (by default the next prompt)."""
    p.send(text + "\r")
    p.expect_exact(then)


def saved(p, path):
    line(p, f"/save {path}", "saved ")
    p.expect_exact("> ")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def users(conv):
    return [m["content"] for m in conv if m["role"] == "user"]


def end(p):
    p.send("/exit\r")
    p.expect(pexpect.EOF)
    p.close()
    assert p.exitstatus == 0


def test_arrow_keys_edit_the_line_and_up_recalls_it(tmp_path):
    p = spawn(tmp_path)
    # "Hllo", three steps left, insert "e": the model gets "Hello".
    line(p, "Hllo" + LEFT * 3 + "e")
    conv = saved(p, tmp_path / "a.json")
    assert users(conv) == ["Hello"]
    assert conv[-1]["role"] == "assistant" and conv[-1]["content"]
    # Up twice: past "/save ..." back to "Hello", edited again at the end.
    line(p, UP + UP + "!")
    assert users(saved(p, tmp_path / "b.json")) == ["Hello", "Hello!"]
    end(p)


def test_commands(tmp_path):
    p = spawn(tmp_path, "--system", "Be brief.")
    line(p, "/help", "/system TEXT")
    p.expect_exact("> ")
    line(p, "/bogus", "unknown command, /help lists them")
    p.expect_exact("> ")
    line(p, "//slash")
    line(p, "first\\", "... ")  # continuation prompt
    line(p, "second")
    conv = saved(p, tmp_path / "a.json")
    assert conv[0] == {"role": "system", "content": "Be brief."}
    assert users(conv) == ["/slash", "first\nsecond"]  # /bogus never reached the model
    assert len(conv) == 5
    # /clear keeps the system message; /load brings the conversation back whole.
    line(p, "/clear")
    assert saved(p, tmp_path / "b.json") == [{"role": "system", "content": "Be brief."}]
    line(p, f"/load {tmp_path / 'a.json'}", "loaded 5 messages")
    p.expect_exact("> ")
    assert saved(p, tmp_path / "c.json") == conv
    # /system replaces the system message and clears the rest.
    line(p, "/system You are a pirate.")
    assert saved(p, tmp_path / "d.json") == [{"role": "system", "content": "You are a pirate."}]
    line(p, "Hi")
    after = saved(p, tmp_path / "e.json")
    assert users(after) == ["Hi"] and after[0]["content"] == "You are a pirate."
    # /save refuses to overwrite the model, and the chat goes on.
    line(p, f"/save {DEFAULT_MODEL}", "error")
    p.expect_exact("> ")
    end(p)


def test_end_of_input_ends_the_chat(tmp_path):
    p = spawn(tmp_path)
    p.sendeof()
    p.expect(pexpect.EOF)
    p.close()
    assert p.exitstatus == 0


def test_ctrl_c_stops_a_reply_and_at_the_prompt_ends(tmp_path):
    # <|im_end|> (id 2) banned and no -n limit: the reply ends only by Ctrl-C.
    p = spawn(tmp_path, "-n", "-1", "--logit-bias", "2=-inf", "--ctx", "1024")
    p.send("Tell me a story.\r")
    p.expect_exact("story.")  # the echo of the typed line, then
    p.expect(r"\w+ \w+ \w+")  # the reply, streaming
    p.sendintr()
    p.expect_exact("> ")  # the chat goes on
    p.send("ab")
    p.sendintr()
    p.expect(pexpect.EOF)
    p.close()
    assert p.exitstatus == 0


def test_full_context_drops_old_turns_and_goes_on(tmp_path):
    """--ctx 96: a message that alone does not fit is refused (dropping
    nothing) and the chat goes on; the fourth turn does not leave room for a
    reply, so the oldest turn goes (said once) and every message is answered."""
    lines = ["Hi", " ".join(["word"] * 120), "What is two plus two?", "Name a color.", "Name a fruit."]
    p = subprocess.run([BIN, "chat", "-m", DEFAULT_MODEL, "--temp", "0", "-n", "8", "--ctx", "96", "--verbose",
                        "--save", str(tmp_path / "c.json")],
                       input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert err.count("context full: dropped the oldest 1 turn\n") == 1, err
    assert "the context holds 96" in err and "not sent" in err
    assert "turn 4: generated" in err
    replies = p.stdout.decode().splitlines()
    assert len(replies) == 4 and all(replies), replies
    conv = json.load(open(tmp_path / "c.json", encoding="utf-8"))
    # the oldest turns are gone from the conversation, the newest is there
    assert users(conv) == ["What is two plus two?", "Name a color.", "Name a fruit."]
