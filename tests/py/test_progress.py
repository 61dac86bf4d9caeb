"""Long work says what happens (issue 20): on a terminal, quantize and
perplexity draw one progress line on stderr, rewritten with '\\r' at most ten
times a second, cut to the terminal's width and erased at the end, so the
screen ends up showing exactly what a piped run prints. Piped, nothing extra
is written (the bytes are those of a run without the line); --progress and
--no-progress override the terminal check. --log-disable drops the
informational lines (stats, notes, per-window values) and -v adds the load's
times, kernels and threads. The terminal is pexpect's pty, as a person's."""
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = ROOT / "tests" / "fixtures" / "text" / "lighthouse.txt"
PPL = ["-m", MODEL, "-f", TEXT, "--ctx", "64", "--chunks", "6", "-t", "2"]

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")


def piped(*args, input=None):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, timeout=300, input=input)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def on_terminal(*args, cols=200):
    """Runs in a pty of `cols` columns: everything written (stdout and stderr
    both go to the terminal, '\\n' arrives as '\\r\\n') and the seconds taken."""
    t = time.monotonic()
    p = pexpect.spawn(BIN, list(map(str, args)), env=dict(os.environ, TERM="xterm"), encoding="utf-8",
                      timeout=300, dimensions=(24, cols))
    p.expect(pexpect.EOF)
    out = p.before
    p.close()
    assert p.exitstatus == 0, out
    return out, time.monotonic() - t


def render(raw):
    """The screen after raw: '\\r' moves to the start of the row, '\\n' to the
    next; later characters overwrite earlier ones. Trailing blanks dropped."""
    rows, col = [[]], 0
    for ch in raw:
        if ch == "\n":
            rows.append([])
            col = 0
        elif ch == "\r":
            col = 0
        else:
            row = rows[-1]
            if col < len(row):
                row[col] = ch
            else:
                row.append(ch)
            col += 1
    return "\n".join("".join(r).rstrip() for r in rows).rstrip("\n")


def redraws(raw, prefix):
    """The texts drawn after a '\\r' that start with prefix (progress frames)."""
    return [seg for seg in raw.replace("\r\n", "\n").split("\r") if seg.startswith(prefix)]


def quantize_args(tmp_path, name):
    return ["quantize", MODEL, tmp_path / name, "q8_0", "--allow-requantize"]


def test_quantize_progress_on_a_terminal(tmp_path):
    raw, secs = on_terminal(*quantize_args(tmp_path, "t.gguf"))
    frames = redraws(raw, "llmk quantize: ")
    assert frames, raw
    assert any(re.match(r"llmk quantize: \[ *\d+/272\] \S+  q\w+ -> q8_0", f) for f in frames), frames
    assert any(f.startswith("llmk quantize: writing ") for f in frames), frames
    # rate-limited: 272 tensors, yet about ten redraws a second (and the one for the writing)
    assert len(frames) <= 10 * secs + 3, (len(frames), secs)
    # erased at the end: the screen is what a piped run prints, nothing left over
    p = piped(*quantize_args(tmp_path, "p.gguf"))
    assert p.stderr == b""
    assert render(raw) == render(p.stdout.decode().replace(str(tmp_path / "p.gguf"), str(tmp_path / "t.gguf")))
    assert (tmp_path / "t.gguf").read_bytes() == (tmp_path / "p.gguf").read_bytes()


def test_progress_line_fits_a_narrow_terminal(tmp_path):
    """A line longer than the terminal would wrap, and '\\r' would then only
    go back to the start of its last row: the line is cut to the width."""
    raw, _ = on_terminal(*quantize_args(tmp_path, "n.gguf"), cols=40)
    frames = redraws(raw, "llmk quantize: ")
    assert frames and all(len(f.rstrip(" ")) <= 39 for f in frames), frames
    assert "llmk quantize: [" in raw
    summary = piped(*quantize_args(tmp_path, "m.gguf")).stdout.decode()
    assert render(raw).splitlines()[0] == summary.splitlines()[0]  # the erased line left no remnant


def test_quantize_piped_writes_nothing_extra(tmp_path):
    plain = piped(*quantize_args(tmp_path, "a.gguf"))
    assert plain.stderr == b"" and b"\r" not in plain.stdout
    assert plain.stdout.decode().splitlines()[-1].endswith("MiB (q8_0)")
    off = piped(*quantize_args(tmp_path, "a.gguf"), "--no-progress")
    assert off.stdout == plain.stdout and off.stderr == b""
    # --progress draws on a pipe too: frames on stderr, erased at the end; stdout unchanged
    forced = piped(*quantize_args(tmp_path, "a.gguf"), "--progress")
    assert forced.stdout == plain.stdout
    err = forced.stderr.decode()
    assert "\rllmk quantize: [" in err and "\n" not in err and render(err) == ""


def test_quantize_log_disable_and_verbose(tmp_path):
    q = piped(*quantize_args(tmp_path, "q.gguf"), "--log-disable", "-v")  # --log-disable wins over -v
    assert q.stdout == b"" and q.stderr == b""
    assert (tmp_path / "q.gguf").stat().st_size > 0
    # an explicit --progress still draws (and erases) its line
    q = piped(*quantize_args(tmp_path, "q.gguf"), "--log-disable", "--progress")
    assert q.stdout == b"" and "\rllmk quantize: [" in q.stderr.decode() and render(q.stderr.decode()) == ""
    v = piped(*quantize_args(tmp_path, "q.gguf"), "-v")
    out = v.stdout.decode().splitlines()
    assert sum(bool(re.match(r"blk\.\d+\.\S+ +q4_1 +-> q8_0", line)) for line in out) >= 30 * 6
    assert re.fullmatch(r"llmk quantize: converted in [\d.]+ s on \d+ threads, written in [\d.]+ s\n",
                        v.stderr.decode()), v.stderr


def ppl_values(text):
    return re.search(r"^(\[1\] .*\[6\] [\d.]+)$", text, re.M).group(1)


def test_perplexity_progress_on_a_terminal():
    raw, _ = on_terminal("perplexity", *PPL)
    frames = redraws(raw, "llmk perplexity: window ")
    assert any(re.match(r"llmk perplexity: window [1-6]/6, PPL \d+\.\d{4}", f) for f in frames), frames
    p = piped("perplexity", *PPL)
    assert p.stderr == b""
    # the values come at the end (the progress line would overwrite them), the same bytes
    assert render(raw) == render(p.stdout.decode())
    assert ppl_values(render(raw)) == ppl_values(p.stdout.decode())


def test_perplexity_piped_and_forced():
    plain = piped("perplexity", *PPL)
    assert b"\r" not in plain.stdout and plain.stderr == b""
    forced = piped("perplexity", *PPL, "--progress")
    assert forced.stdout == plain.stdout  # stdout is not the terminal: the values stream as before
    err = forced.stderr.decode()
    assert "\rllmk perplexity: window 0/6" in err and render(err) == ""
    assert piped("perplexity", *PPL, "--no-progress").stdout == plain.stdout


def test_perplexity_log_disable_keeps_only_the_results():
    plain = piped("perplexity", *PPL).stdout.decode().splitlines()
    assert [line.split(":")[0] for line in plain[:3]] == ["model", "text", "windows"]
    quiet = piped("perplexity", *PPL, "--log-disable", "-v")
    assert quiet.stderr == b""
    assert quiet.stdout.decode().splitlines() == [line for line in plain if line.startswith(("mean NLL", "PPL"))]
    v = piped("perplexity", *PPL, "-v").stderr.decode()
    assert re.search(r"^llmk perplexity: model loaded in [\d.]+ s, weights ready in [\d.]+ s \(kernels \S+, 2 "
                     r"threads, KV cache f16\)$", v, re.M), v
    assert re.search(r"^llmk perplexity: 6 windows of 64 tokens evaluated in [\d.]+ s", v, re.M), v


def test_run_stats_lines():
    args = ["run", "-m", MODEL, "-p", "Hi", "-n", "3", "--temp", "0"]
    plain = piped(*args)
    assert re.search(rb"^llmk run: prompt \d+ tokens, prefill", plain.stderr, re.M)
    quiet = piped(*args, "--log-disable", "-v")  # --log-disable wins over -v
    assert quiet.stderr == b"" and quiet.stdout == plain.stdout
    v = piped(*args, "-v").stderr.decode()
    assert re.search(r"^llmk run: model loaded in [\d.]+ s, weights ready in [\d.]+ s \(kernels \S+, \d+ threads, "
                     r"KV cache f16\)$", v, re.M), v
    # a load under a second draws nothing, even on a terminal
    raw, _ = on_terminal(*args)
    assert "loading model" not in raw


def test_batch_lines(tmp_path):
    reqs = "".join(json.dumps({"prompt": p, "max_tokens": 3}) + "\n" for p in ("Hello", "The sky is", "One, two,"))
    args = ["batch", "-m", MODEL, "-f", "-", "--temp", "0"]
    plain = piped(*args, input=reqs.encode())
    err = plain.stderr.decode()
    # piped: plain lines (at every tenth of the requests done), then the stats line
    lines = err.split("\n")
    assert "\r" not in err and lines[-1] == "" and all(line.startswith("llmk batch: ") for line in lines[:-1])
    assert lines[-3].startswith("llmk batch: 3/3 requests, 9 tokens generated") and "preemptions" in lines[-2]
    quiet = piped(*args, "--log-disable", input=reqs.encode())
    assert quiet.stderr == b"" and quiet.stdout == plain.stdout
    forced = piped(*args, "--progress", input=reqs.encode()).stderr.decode()
    last = forced.splitlines()[-1]
    assert "\rllmk batch: " in forced and render(forced) == render(last) and "preemptions" in last


def test_bench_log_disable():
    args = ["bench", "-m", MODEL, "-p", "8", "-n", "4", "-r", "1", "-t", "2"]
    plain = piped(*args).stdout.decode()
    assert "decode streams" in plain and "peak RSS" in plain
    quiet = piped(*args, "--log-disable").stdout.decode()
    assert quiet.count("\n") == 4 and " tg4 |" in quiet and "decode streams" not in quiet and "RSS" not in quiet


@pytest.mark.parametrize("cmd", ["run", "chat", "perplexity", "quantize", "bench", "batch"])
def test_every_long_command_takes_the_flags(cmd):
    h = subprocess.run([BIN, cmd, "-h"], capture_output=True, text=True).stdout
    for flag in ("--log-disable", "-v, --verbose", "--progress", "--no-progress"):
        assert flag in h, (cmd, flag)
