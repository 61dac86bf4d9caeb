"""Nothing a user does can destroy a file or exhaust the machine (issue 15).

Data loss: every subcommand that writes a file refuses an output that is its
model (or another input) under every spelling (same path, hard link, symlink,
relative path), and a write that fails leaves the target as it was, with no
temporary file behind. Memory and time: a context past the training length
needs --allow-long-ctx, a KV cache that cannot fit is refused with the figure,
KV pages are not touched up front, input lines are capped, FIFOs are refused.
Silent wrong answers: quantize validates rows, template JSON is strict,
stdout write errors fail the command.

All writes go to copies of the default model in a temporary folder."""
import hashlib
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk")).resolve())
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = ROOT / "tests" / "fixtures" / "text" / "lighthouse.txt"

needs_model = pytest.mark.skipif(not MODEL.exists(), reason=f"default model {MODEL} not present")


def run(*args, cwd=None, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, timeout=300, preexec_fn=None,
        input=None):
    kw = {"stdin": stdin} if input is None else {"input": input}
    return subprocess.run([BIN, *map(str, args)], stdout=stdout, stderr=subprocess.PIPE, cwd=cwd,
                          timeout=timeout, preexec_fn=preexec_fn, **kw)


def fails(r, status, *words, code=1):
    err = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
    assert r.returncode == code, (r.returncode, err)
    assert f"error: {status}" in err, err
    for w in words:
        assert w in err, (w, err)
    return err


def digest(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def model_digest():
    return digest(MODEL)


@pytest.fixture()
def model_copy(tmp_path):
    """A private copy of the default model in its own folder (tests write there)."""
    d = tmp_path / "models"
    d.mkdir()
    m = d / "X.gguf"
    m.write_bytes(MODEL.read_bytes())
    return m


def leftovers(d):
    return [p.name for p in Path(d).iterdir() if ".llmk-" in p.name]


# ---- data loss -----------------------------------------------------------------

def spellings(m):
    """(output spelling, cwd) pairs that all name the file m."""
    d = m.parent
    hard = d / "hard.gguf"
    os.link(m, hard)
    sym = d / "sym.gguf"
    sym.symlink_to(m.name)
    sub = d / "sub"
    sub.mkdir()
    return [(str(m), None), (str(hard), None), (str(sym), None), ("./X.gguf", d), ("../X.gguf", sub)]


WRITERS = {
    "quantize": lambda m, out: ["quantize", m, out, "q8_0", "--allow-requantize"],
    "logits": lambda m, out: ["logits", "-m", m, "--ids", "1,2,3", "--out", out],
    "perplexity": lambda m, out: ["perplexity", "-m", m, "-f", TEXT, "--ctx", 64, "--chunks", 1,
                                  "--save-logits", out],
    "chat": lambda m, out: ["chat", "-m", m, "--save", out, "-n", 2],
    "batch": lambda m, out: ["batch", "-m", m, "-f", "-", "-o", out, "-n", 2],
}


@needs_model
@pytest.mark.parametrize("cmd", sorted(WRITERS))
def test_output_that_is_the_model_is_refused(cmd, model_copy, model_digest):
    for out, cwd in spellings(model_copy):
        m = model_copy if cwd is None else os.path.relpath(model_copy, cwd)
        r = run(*WRITERS[cmd](m, out), cwd=cwd, input=b"hello\n")
        fails(r, "llmk_output_is_input", "same file as the input")
        assert digest(model_copy) == model_digest, (cmd, out)
        assert model_copy.stat().st_nlink == 2  # the hard link is still one file with the model
        assert (model_copy.parent / "sym.gguf").is_symlink()
        assert leftovers(model_copy.parent) == []


@needs_model
def test_perplexity_output_may_not_be_its_text(model_copy, tmp_path):
    text = tmp_path / "t.txt"
    text.write_bytes(TEXT.read_bytes())
    r = run("perplexity", "-m", model_copy, "-f", text, "--ctx", 64, "--save-logits", text)
    fails(r, "llmk_output_is_input")
    assert text.read_bytes() == TEXT.read_bytes()


def no_fsize_signal_limit(n):
    """preexec_fn: files may grow to n bytes; past that write() fails (EFBIG)."""
    def f():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return f


@needs_model
@pytest.mark.parametrize("cmd", ["quantize", "logits", "perplexity", "chat"])
def test_failed_write_leaves_the_target_and_no_temporary(cmd, model_copy, tmp_path):
    """A write that fails part-way (a file size limit) keeps the old target
    whole; only the temporary file is removed."""
    out = tmp_path / "precious.bin"
    out.write_bytes(b"the user's data\n" * 100)
    before = out.read_bytes()
    line = b"=" * 9000 + b"\n"  # chat: a saved conversation past the 8 KiB limit (142 tokens; "a" * 9000 is 2250)
    r = run(*WRITERS[cmd](model_copy, out), input=line, preexec_fn=no_fsize_signal_limit(8192))
    fails(r, "llmk_io_error")
    assert out.read_bytes() == before
    assert leftovers(tmp_path) == []


@pytest.fixture()
def full_device(tmp_path):
    """A private node of /dev/full's device (1, 7), so that a buggy build that
    removes its output removes this one, not the machine's. /dev/full itself
    where mknod is not allowed."""
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except OSError:
        node = Path("/dev/full")
    if not stat.S_ISCHR(os.stat(node).st_mode):
        pytest.skip(f"{node} is not a character device")
    return node


@needs_model
def test_failed_quantize_never_removes_a_device(model_copy, full_device):
    r = run("quantize", model_copy, full_device, "q8_0", "--allow-requantize")
    fails(r, "llmk_io_error", str(full_device))
    assert stat.S_ISCHR(os.stat(full_device).st_mode)


@needs_model
def test_outputs_replace_through_links_and_keep_permissions(model_copy, tmp_path):
    target = tmp_path / "target.gguf"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link.gguf"
    link.symlink_to(target)
    r = run("quantize", model_copy, link, "q8_0", "--allow-requantize")
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.stat().st_size > 1000
    assert (target.stat().st_mode & 0o777) == 0o640
    assert leftovers(tmp_path) == []
    r = run("info", link)
    assert r.returncode == 0 and b"q8_0" in r.stdout.lower(), r.stderr


@needs_model
def test_chat_survives_its_model_being_requantized(model_copy, tmp_path):
    """A chat maps X; another llmk writes a new X. The chat keeps its mapping
    (the new file is renamed over the name, never written in place)."""
    other = tmp_path / "Y.gguf"
    other.write_bytes(MODEL.read_bytes())
    p = subprocess.Popen([BIN, "chat", "-m", str(model_copy), "-n", "4", "--temp", "0"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p.stdin.write(b"Hello\n")
        p.stdin.flush()
        first = p.stdout.readline()
        q = run("quantize", other, model_copy, "q8_0", "--allow-requantize")
        assert q.returncode == 0, q.stderr
        rest, err = p.communicate(input=b"And again\n", timeout=120)
    finally:
        p.kill() if p.poll() is None else None
    assert p.returncode == 0, err
    assert first.strip() and rest.strip()


# ---- memory and time bounds -----------------------------------------------------

@needs_model
def test_context_past_training_needs_the_flag(tmp_path):
    long_text = tmp_path / "long.txt"
    long_text.write_text(TEXT.read_text() * 7)  # past 9000 tokens
    r = run("run", "-m", MODEL, "-p", "Hi", "-n", 2, "--ctx", 1000000)
    fails(r, "llmk_context_over_train", "1000000", "8192", "--allow-long-ctx")
    r = run("bench", "-m", MODEL, "-p", 100000, "-n", 0)
    fails(r, "llmk_context_over_train", "100001")
    r = run("perplexity", "-m", MODEL, "-f", long_text, "--ctx", 9000)
    fails(r, "llmk_context_over_train")
    for path in ("f32", "ref"):
        fails(run("run", "-m", MODEL, "-p", "Hi", "-n", 2, "--ctx", 9000, "--path", path), "llmk_context_over_train")


@needs_model
def test_long_context_is_lazy_with_the_flag():
    """Allowed, a 200k context works, warns, and its KV pages (f32: 9 GB) are
    not touched: the process stays far below that."""
    # measured in a child of its own: RUSAGE_CHILDREN is the peak over every child reaped
    probe = ("import resource, subprocess, sys\n"
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
             "sys.stderr.buffer.write(r.stderr)\n"
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    args = [BIN, "run", "-m", MODEL, "-p", "Hi", "-n", 2, "--temp", 0, "--ctx", 200000, "--allow-long-ctx",
            "--kv-type", "f32", "-t", 2]
    r = subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True, timeout=300)
    rc, peak_kib = map(int, r.stdout.split())
    assert rc == 0, r.stderr
    assert "warning" in r.stderr and "200000" in r.stderr
    assert peak_kib < 1.5 * 1024 * 1024, f"peak RSS {peak_kib} KiB for a 9 GB KV cache"


@needs_model
@pytest.mark.skipif(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") > 150e9,
                    reason="a 4M-token f32 cache (~184 GB) would fit this machine")
def test_kv_that_cannot_fit_is_refused_with_the_figure():
    for path in ("fast", "f32"):
        r = run("run", "-m", MODEL, "-p", "Hi", "-n", 2, "--ctx", 4000000, "--allow-long-ctx", "--path", path,
                "--kv-type", "f32")
        fails(r, "llmk_out_of_memory", "GiB", "KV cache", "4000000")


@needs_model
def test_chat_input_lines_are_capped():
    with open("/dev/zero", "rb") as z:
        r = run("chat", "-m", MODEL, "-n", 2, stdin=z, timeout=60)
    fails(r, "llmk_bad_request", "1 MiB")
    r = run("chat", "-m", MODEL, "-n", 2, input=b"a\x00b\n")
    fails(r, "llmk_bad_request", "NUL")


@needs_model
def test_fifo_inputs_are_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    fails(run("info", fifo, timeout=20), "llmk_io_error", "not a regular file")
    fails(run("run", "-m", fifo, "-p", "x", timeout=20), "llmk_io_error", "not a regular file")
    fails(run("perplexity", "-m", MODEL, "-f", fifo, timeout=20), "llmk_io_error", "not a regular file")
    fails(run("template", "-m", MODEL, "--messages", fifo, timeout=20), "llmk_io_error", "not a regular file")
    fails(run("info", tmp_path, timeout=20), "llmk_io_error", "directory")
    assert time.monotonic() - t0 < 20


# ---- silent wrong answers ----------------------------------------------------------

def small_f32_model(path, values):
    """A GGUF with one 2-D f32 tensor holding `values` (rows of 32)."""
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("blk.0.ffn_up.weight", np.asarray(values, dtype=np.float32).reshape(-1, 32))
    w.add_tensor("output_norm.weight", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("bad,where", [(float("nan"), "not finite"), (float("inf"), "not finite"),
                                       (-float("inf"), "not finite"), (1e30, "too large")])
def test_quantize_refuses_non_finite_and_out_of_range_rows(tmp_path, bad, where):
    v = np.linspace(-1, 1, 4 * 32).astype(np.float32)
    v[2 * 32 + 5] = bad
    src = tmp_path / "in.gguf"
    small_f32_model(src, v)
    out = tmp_path / "out.gguf"
    err = fails(run("quantize", src, out, "q8_0"), "llmk_nan_input", "blk.0.ffn_up.weight", "row 2", "column 5",
                where)
    assert not out.exists() and leftovers(tmp_path) == []
    if where == "not finite":  # a tensor kept in its type is checked too
        fails(run("quantize", src, out, "f32"), "llmk_nan_input", "row 2")
    assert err


def test_quantize_accepts_large_finite_values_f32_keeps(tmp_path):
    v = np.linspace(-1, 1, 4 * 32).astype(np.float32)
    v[7] = 1e30
    src = tmp_path / "in.gguf"
    small_f32_model(src, v)
    r = run("quantize", src, tmp_path / "out.gguf", "f32")
    assert r.returncode == 0, r.stderr


@needs_model
def test_template_json_is_strict():
    fails(run("template", "-m", MODEL, input=b'[{"role":"user","content":"hi"}] trailing'),
          "llmk_bad_request", "after the JSON value")
    fails(run("template", "-m", MODEL, input=b'[{"role":"user","content":"a\\u0000b"}]'),
          "llmk_bad_request", "u0000")
    ok = run("template", "-m", MODEL, input=b'[{"role":"user","content":"a\\\\u0000b"}]\n  ')
    assert ok.returncode == 0 and b"a\\u0000b" in ok.stdout, ok.stderr


STDOUT_CMDS = [
    ["run", "-m", MODEL, "--raw", "-p", "Once upon a time", "-n", 300, "--temp", 0],
    ["tokenize", "-m", MODEL, "hello world"],
    ["template", "-m", MODEL, "--messages", "-"],
    ["plan", "-m", MODEL, "--ctx", 1024],
    ["info", MODEL, "--json"],
    ["chat", "-m", MODEL, "-n", 300, "--temp", 0],
]


@needs_model
@pytest.mark.parametrize("args", STDOUT_CMDS, ids=lambda a: a[0])
def test_stdout_write_errors_fail_the_command(args, full_device):
    msgs = b'[{"role":"user","content":"hi"}]' if args[0] == "template" else b"Tell me a long story\n"
    with open(full_device, "wb") as full:
        fails(run(*args, stdout=full, input=msgs), "llmk_io_error", "standard output")
    # closed stdout: the child starts with fd 1 closed
    r = subprocess.run([BIN, *map(str, args)], input=msgs, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       preexec_fn=lambda: os.close(1), timeout=300)
    fails(r, "llmk_io_error", "standard output")


@needs_model
def test_closed_stdout_never_writes_into_an_output(model_copy, tmp_path):
    """With fd 1 closed, the next file opened would take its number; printf
    must not land in the quantized file."""
    out = tmp_path / "o.gguf"
    r = subprocess.run([BIN, "quantize", str(model_copy), str(out), "q8_0", "--allow-requantize"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1),
                       timeout=300)
    fails(r, "llmk_io_error", "standard output")
    assert out.read_bytes()[:4] == b"GGUF"
    assert run("info", out).returncode == 0


def test_short_file_message_is_whole(tmp_path):
    f = tmp_path / "short.gguf"
    f.write_bytes(b"GGU")
    err = fails(run("info", f), "llmk_truncated_file")
    assert f"{f}: header: file has 3 bytes, too short for the magic" in err, err
