"""The llmk command's option tables (app/opts.h): every subcommand parses its
options the same way. `--opt=value` is the same as `--opt value`; a bad value
of a shared option (--ctx, -t) gives the same message and exit 2 in every
command that takes it; a flag refuses `=value`; unknown options exit 2; and
each command's -h, generated from its table, lists every option it takes (and
every option it lists is one it takes)."""
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
TEXT = ROOT / "tests" / "fixtures" / "text" / "lighthouse.txt"

needs_model = pytest.mark.skipif(not MODEL.exists(), reason=f"default model {MODEL} not present")

SAMPLING = ["--temp", "--top-k", "--top-p", "--min-p", "--typical-p", "--eta", "--repeat-penalty",
            "--repeat-last-n", "--frequency-penalty", "--presence-penalty", "--logit-bias", "--samplers", "--seed",
            "--stop", "--system", "--chat-template"]

# Every spelling each command has always accepted (the tests and docs use them).
OPTIONS = {
    "run": ["-m", "--model", "-p", "--prompt", "--prompt-ids", "-n", "--n-predict", "--chat", "--raw", "--no-chat",
            "-f", "--file", "-cnv", "--conversation", "-i", "--interactive", "-e", "--escape", "--no-display-prompt",
            "-t", "--threads", "--path", "--kv-type", "-c", "--ctx", "--ctx-size", "--allow-long-ctx", "--special",
            "--print-ids", "-v", "--verbose", "--log-disable", "--progress", "--no-progress", "-s", *SAMPLING],
    "chat": ["-m", "--model", "-n", "--n-predict", "-t", "--threads", "-c", "--ctx", "--ctx-size", "--allow-long-ctx",
             "--path", "--kv-type", "--save", "--messages", "-v", "--verbose", "--log-disable", "--progress",
             "--no-progress", "-s", *SAMPLING],
    "info": ["-m", "--model", "--tensors", "--json", "--system", "--program"],
    "logits": ["-m", "--model", "--ids", "--path", "--kv-type", "-t", "--threads", "-o", "--out",
               "--allow-long-ctx"],
    "embed": ["-m", "--model", "-p", "--prompt", "-f", "--file", "--embd-separator", "--pooling", "--embd-normalize",
              "--embd-output-format", "--path", "--kv-type", "-t", "--threads", "-c", "--ctx", "--ctx-size",
              "--allow-long-ctx"],
    "tokenize": ["-m", "--model", "-f", "--file", "--special", "--no-bos", "--pieces"],
    "detokenize": ["-m", "--model", "--special"],
    "template": ["-m", "--model", "--messages", "--no-generation-prompt", "--chat-template", "--info"],
    "plan": ["-m", "--model", "--ctx", "--batch", "--kv-type", "--layers", "--kv-heads", "--head-dim",
             "--block-size", "--prefix", "--accept-rate", "--draft-depth", "--draft-cost", "--json"],
    "quantize": ["--pure", "--tensor-type", "--allow-requantize", "--dry-run", "--log-disable", "-v", "--verbose", "--progress", "--no-progress"],
    "perplexity": ["-m", "--model", "-f", "--file", "-c", "--ctx", "--ctx-size", "--chunks", "-t", "--threads", "--path",
                   "--kv-type", "--save-logits", "--kl-base", "--allow-long-ctx", "--log-disable", "-v", "--verbose", "--progress", "--no-progress"],
    "bench": ["-m", "--model", "-p", "-n", "-d", "-t", "--threads", "-r", "-B", "--path", "--kv-type", "-b", "--json",
              "--phases", "--allow-long-ctx", "--log-disable", "-v", "--verbose", "--progress", "--no-progress"],
    "serve": ["-m", "--model", "--host", "--port", "--parallel", "-c", "--ctx", "--ctx-size", "-t", "--threads",
              "--kv-type", "--kv-blocks", "--step-tokens", "--max-queue", "--api-key", "--alias", "--chat-template",
              "--timeout", "--max-body", "--drain-timeout"],
}
COMMANDS = list(OPTIONS)
TAKE_CTX = ["run", "chat", "perplexity", "plan", "embed"]
TAKE_THREADS = ["run", "chat", "logits", "perplexity", "bench", "embed"]


def llmk(*args, stdin=None, timeout=300):
    return subprocess.run([LLMK, *map(str, args)], capture_output=True, text=True, input=stdin, timeout=timeout)


def usage_error(r, cmd):
    """A usage error: exit 2, nothing on stdout, the message and the hint on stderr."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"llmk {cmd}: ") and lines[-1] == f"(see 'llmk {cmd} -h')", r.stderr
    return lines[0][len(f"llmk {cmd}: "):]


# An option line of the generated help: "  -m, --model FILE", "      --json", "  -n N", and with a second name
# (llama.cpp's spelling) "  -c, --ctx, --ctx-size N", "      --conversation, -cnv".
OPTION_LINE = re.compile(r"^  ((?:-[A-Za-z0-9]|    --?[a-z][a-z0-9-]*)(?:, --?[a-z][a-z0-9-]*)*)(?= |$)")


def listed_options(help_text):
    names = []
    for line in help_text.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            names += [n.strip() for n in m.group(1).split(", ")]
    return names


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_lists_every_option(cmd):
    for h in ("-h", "--help"):
        r = llmk(cmd, h)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith(f"usage: llmk {cmd}")
    listed = listed_options(r.stdout)
    assert len(listed) == len(set(listed)), listed  # no option defined twice
    missing = set(OPTIONS[cmd]) - set(listed)
    assert not missing, f"llmk {cmd} -h does not list {sorted(missing)}"
    assert "-h" in listed and "--help" in listed
    # Each listed option is one the parser knows: followed by -h, a known
    # option either prints the help (its value was fine) or complains about
    # its value; only an unknown one says "unknown option". Nothing runs.
    for opt in listed:
        if opt in ("-h", "--help"):
            continue
        args = [f"{opt}=@"] if opt.startswith("--") else [opt, "@"]
        r = llmk(cmd, *args, "-h")
        assert "unknown option" not in r.stderr, (cmd, opt, r.stderr)
        assert r.returncode in (0, 2), (cmd, opt, r.returncode, r.stderr)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_unknown_options(cmd):
    for args, name in ((["--no-such-option"], "--no-such-option"), (["--no-such-option=3"], "--no-such-option"),
                       (["-Z"], "-Z"), (["-t4"], "-t4")):
        msg = usage_error(llmk(cmd, *args), cmd)
        assert msg == f"unknown option '{name}'", msg


@pytest.mark.parametrize("value", ["0", "-1", "x", "12abc", "", "4194305", "99999999999999999999"])
def test_bad_ctx_same_everywhere(value):
    msgs = set()
    for cmd in TAKE_CTX:
        for args in (["--ctx", value], [f"--ctx={value}"]):
            msgs.add(usage_error(llmk(cmd, *args), cmd))
    assert msgs == {f"--ctx expects an integer in [1, 4194304], got '{value}'"}, msgs
    # -c is the same option; messages name the spelling used
    for cmd in TAKE_CTX:
        assert usage_error(llmk(cmd, "-c", value), cmd) == f"-c expects an integer in [1, 4194304], got '{value}'"


@pytest.mark.parametrize("value", ["0", "257", "1024", "-3", "two"])
def test_bad_threads_same_everywhere(value):
    for cmd in TAKE_THREADS:
        assert usage_error(llmk(cmd, "-t", value), cmd) == f"-t expects an integer in [1, 256], got '{value}'"
        assert usage_error(llmk(cmd, f"--threads={value}"), cmd) == \
            f"--threads expects an integer in [1, 256], got '{value}'"


def test_threads_limit_is_the_executors():
    for cmd in TAKE_THREADS:
        assert llmk(cmd, "-t", "256", "-h").returncode == 0
        assert llmk(cmd, "--threads=1", "-h").returncode == 0


def test_shared_path_and_kv_type():
    for cmd in ("run", "chat", "logits", "perplexity", "bench"):
        assert usage_error(llmk(cmd, "--path=gpu"), cmd) == "--path expects ref, f32 or fast, got 'gpu'"
        assert usage_error(llmk(cmd, "--kv-type", "q4_0"), cmd) == "--kv-type expects f32, f16 or q8_0, got 'q4_0'"
    assert usage_error(llmk("plan", "--kv-type=q4_0"), "plan") == "--kv-type expects f32, f16 or q8_0, got 'q4_0'"


@pytest.mark.parametrize("cmd,flag", [("run", "--special"), ("chat", "--verbose"), ("info", "--json"),
                                      ("logits", "--allow-long-ctx"), ("tokenize", "--no-bos"),
                                      ("template", "--info"), ("plan", "--json"), ("quantize", "--pure"),
                                      ("bench", "--phases"), ("perplexity", "--allow-long-ctx"),
                                      ("detokenize", "--special"), ("run", "--help")])
def test_flag_refuses_a_value(cmd, flag):
    for v in ("1", ""):
        msg = usage_error(llmk(cmd, f"{flag}={v}"), cmd)
        assert msg == f"{flag} takes no value (got '{flag}={v}')", msg


def test_missing_value():
    assert usage_error(llmk("run", "-p"), "run") == "-p needs a value (TEXT)"
    assert usage_error(llmk("plan", "--ctx"), "plan") == "--ctx needs a value (N)"
    assert usage_error(llmk("perplexity", "-f"), "perplexity") == "-f needs a value (TEXT)"


def test_perplexity_window_check():
    # --ctx 3 is a valid context but too short a perplexity window: an explicit check after parsing
    msg = usage_error(llmk("perplexity", "-f", TEXT, "--ctx=3"), "perplexity")
    assert "--ctx 3" in msg and "at least 4" in msg


def test_positionals():
    assert usage_error(llmk("quantize", "a", "b"), "quantize") == "expected IN.gguf OUT.gguf TYPE"
    assert "unexpected argument 'd'" in usage_error(llmk("quantize", "a", "b", "c", "d"), "quantize")
    assert "more than one TEXT" in usage_error(llmk("tokenize", "a", "b"), "tokenize")
    assert "more than one" in usage_error(llmk("info", "a.gguf", "b.gguf"), "info")
    assert usage_error(llmk("run", "stray"), "run") == "unexpected argument 'stray'"


def plan_json(*args):
    r = llmk("plan", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_equals_form_plan():
    spaced = plan_json("--layers", 2, "--kv-heads", 2, "--head-dim", 8, "--ctx", 64, "--batch", 3,
                       "--kv-type", "q8_0", "--accept-rate", 0.5)
    joined = plan_json("--layers=2", "--kv-heads=2", "--head-dim=8", "--ctx=64", "--batch=3", "--kv-type=q8_0",
                       "--accept-rate=0.5")
    assert spaced == joined
    assert joined["ctx"] == 64 and joined["batch"] == 3 and joined["kv_type"] == "q8_0"
    assert plan_json("--layers=2", "--kv-heads=2", "--head-dim=8", "-c", 64)["ctx"] == 64


@needs_model
def test_equals_form_run():
    base = ["-m", MODEL, "--raw", "-n", 3, "--print-ids"]
    spaced = llmk("run", *base, "-p", "Hello", "--temp", 0, "--ctx", 32, "--path", "f32", "-t", 1)
    joined = llmk("run", *base, "--prompt=Hello", "--temp=0", "--ctx=32", "--path=f32", "--threads=1")
    assert spaced.returncode == 0 and joined.returncode == 0, (spaced.stderr, joined.stderr)
    assert spaced.stdout == joined.stdout and len(json.loads(joined.stdout)) == 3
    assert "path f32, 1 threads" in joined.stderr
    # a value that itself holds '=' keeps it: only the first '=' splits
    r = llmk("run", *base, "--temp=0", "--ctx=32", "--prompt=a=b", "--logit-bias=5=-inf")
    assert r.returncode == 0, r.stderr


@needs_model
def test_equals_form_tokenize_and_logits(tmp_path):
    assert llmk("tokenize", "--model=" + str(MODEL), "--no-bos", "Hi there").stdout == \
        llmk("tokenize", "-m", MODEL, "--no-bos", "Hi there").stdout
    f = tmp_path / "t.txt"
    f.write_text("Hi there")
    assert llmk("tokenize", f"--model={MODEL}", f"--file={f}").stdout == llmk("tokenize", "-m", MODEL, "-f", f).stdout
    a, b = tmp_path / "a.f32", tmp_path / "b.f32"
    r1 = llmk("logits", "-m", MODEL, "--ids", "1,2,3", "--path", "f32", "-t", 1, "--out", a)
    r2 = llmk("logits", f"--model={MODEL}", "--ids=1,2,3", "--path=f32", "--threads=1", f"--out={b}")
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes()) > 0


@needs_model
def test_equals_form_perplexity():
    common = ["-m", MODEL, "--path", "f32"]
    spaced = llmk("perplexity", *common, "-f", TEXT, "--ctx", 16, "--chunks", 2, "-t", 1)
    joined = llmk("perplexity", *common, f"--file={TEXT}", "--ctx=16", "--chunks=2", "--threads=1")
    assert spaced.returncode == 0 and joined.returncode == 0, (spaced.stderr, joined.stderr)
    ppl = [re.search(r"^PPL = .*$", r.stdout, re.M).group(0) for r in (spaced, joined)]
    assert ppl[0] == ppl[1]
    assert "2 of 16 tokens" in joined.stdout


@needs_model
def test_equals_form_bench():
    r = llmk("bench", f"--model={MODEL}", "-p", 4, "-n", 2, "-r", 1, "--threads=1", "--path=f32", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert all(o["n_threads"] == 1 and o["path"] == "f32" for o in out)


@needs_model
def test_equals_form_chat_and_template(tmp_path):
    msgs = tmp_path / "m.json"
    msgs.write_text('[{"role": "user", "content": "Hi"}]')
    spaced = llmk("template", "-m", MODEL, "--messages", msgs, "--chat-template", "chatml")
    joined = llmk("template", f"--model={MODEL}", f"--messages={msgs}", "--chat-template=chatml")
    assert spaced.returncode == 0 and spaced.stdout == joined.stdout and "<|im_start|>user" in joined.stdout
    args = ["-m", MODEL, "-n", 4, "--path", "f32"]
    spaced = llmk("chat", *args, "--temp", 0, "--ctx", 128, "-t", 1, stdin="Hi\n")
    joined = llmk("chat", *args, "--temp=0", "--ctx=128", "--threads=1", stdin="Hi\n")
    assert spaced.returncode == 0 and joined.returncode == 0, (spaced.stderr, joined.stderr)
    assert spaced.stdout == joined.stdout and spaced.stdout.strip()


# ---- llama.cpp's spellings and the did-you-mean of unknown options (issue 20) ----

@pytest.mark.parametrize("cmd,typo,near", [
    ("run", "--temperture", "--temp"), ("run", "--seeed", "--seed"), ("run", "--n_predict", "--n-predict"),
    ("run", "--top_k=3", "--top-k"), ("chat", "--ctxsize", "--ctx-size"), ("serve", "--prot", "--port"),
    ("perplexity", "--chunk", "--chunks"), ("batch", "--paralel", "--parallel"), ("info", "--jsn", "--json"),
    ("run", "--verison", "--version"), ("bench", "--phase", "--phases"), ("run", "--conversaton", "--conversation"),
])
def test_unknown_option_names_the_nearest(cmd, typo, near):
    name = typo.split("=")[0]
    assert usage_error(llmk(cmd, typo), cmd) == f"unknown option '{name}'; did you mean '{near}'?"


def test_far_unknown_options_get_no_guess():
    for cmd, name in (("run", "--frobnicate"), ("chat", "--xyzzy"), ("run", "-qq"), ("run", "--no-such-option")):
        assert usage_error(llmk(cmd, name), cmd) == f"unknown option '{name}'"


@pytest.mark.parametrize("cmd", ["run", "chat", "perplexity", "serve", "batch"])
def test_ctx_size_is_ctx(cmd):
    for args, flag in ((["--ctx-size", "0"], "--ctx-size"), (["--ctx-size=0"], "--ctx-size"), (["-c", "0"], "-c")):
        assert usage_error(llmk(cmd, *args), cmd) == f"{flag} expects an integer in [1, 4194304], got '0'"
    assert "-c, --ctx, --ctx-size N" in llmk(cmd, "-h").stdout


def test_llama_spellings_parse():
    # each is a known option: with -h after it, the help prints (nothing runs)
    for cmd, args in (("run", ["-f", "x"]), ("run", ["-cnv"]), ("run", ["-i"]), ("run", ["-e"]),
                      ("run", ["--log-disable"]), ("run", ["-n", "-1"]), ("run", ["--n-predict=-1"]),
                      ("run", ["-s", "5"]), ("run", ["--no-chat"]), ("run", ["--raw"]), ("chat", ["-s", "5"]),
                      ("chat", ["-n", "-1"]), ("chat", ["--log-disable"]), ("chat", ["-i"]), ("chat", ["-cnv"]), ("batch", ["-s", "3"]),
                      ("batch", ["--n-predict", "4"]), ("run", ["--verbose"])):
        r = llmk(cmd, *args, "-h")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: llmk {cmd}"), (cmd, args, r.stderr)
    assert usage_error(llmk("run", "-n", "-2"), "run") == "-n expects an integer in [-1, 16777216], got '-2'"
    assert usage_error(llmk("run", "-s", "x"), "run") == \
        "-s expects an integer in [-1, 9223372036854775807], got 'x'"
    assert usage_error(llmk("chat", "-n", "0"), "chat") == "-n 0 leaves no room for a reply (-1: no limit)"


def test_run_prompt_checks():
    assert usage_error(llmk("run"), "run") == "-p PROMPT (or -f FILE, or --prompt-ids) is required"
    assert usage_error(llmk("run", "-p", "a", "--prompt-ids", "1"), "run") == \
        "-p, -f and --prompt-ids exclude each other"
    assert usage_error(llmk("run", "--raw", "--chat", "-p", "a"), "run") == \
        "--raw excludes --chat, --system and --chat-template"
    assert usage_error(llmk("run", "--chat", "--prompt-ids", "1"), "run") == "--chat needs -p PROMPT or -f FILE"
    assert usage_error(llmk("run", "-e", "--prompt-ids", "1"), "run") == "-e applies to -p or -f, not --prompt-ids"
    msg = usage_error(llmk("run", "-cnv", "-f", "x"), "run")
    assert msg.startswith("--conversation runs llmk chat, which takes none of -f")
