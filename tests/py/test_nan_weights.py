"""A NaN or infinity in the weights fails every decode path with llmk_nan_input
(issue 15, "silent wrong answers"), instead of the fast path's quantizers
turning it into finite garbage printed with exit 0.

Copies of the default model get one f16 block scale overwritten (offsets from
gguf-py): a Q4_1 weight of a layer (attention or FFN; NaN or +-inf), and
token_embd (Q8_0, also the LM head: the row of a prompt token, found first
by the layer-0 norm, and a row no prompt token uses, found in the logits).
`llmk run` and `llmk logits` must exit 1 naming llmk_nan_input on the fast
path (int16 activations and LLMK_ACT=q8) and on the f32 path; an unmodified
copy still runs."""
import json
import os
import pathlib
import shutil
import struct
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLMK = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not downloaded")

PROMPT = "The capital of France is"
NAN, INF, NINF = 0x7E00, 0x7C00, 0xFC00
# (case, tensor, block index or ("row of prompt token", i) / ("row", id), f16 bits, phase named by the fast path)
CASES = [
    ("ffn_up-nan", "blk.4.ffn_up.weight", 100, NAN, "(blk.4.gate_up)"),
    ("attn_k-inf", "blk.10.attn_k.weight", 7, INF, "(blk.10.rope_kv)"),
    ("attn_output-ninf", "blk.2.attn_output.weight", 3, NINF, "(blk.2.ffn_norm)"),
    ("ffn_down-nan", "blk.29.ffn_down.weight", 11, NAN, "(output_norm)"),
    ("embd-prompt-nan", "token_embd.weight", ("prompt", 2), NAN, "(blk.0.attn_norm)"),
    ("embd-lm_head-inf", "token_embd.weight", ("row", 12345), INF, "logit of token 12345 "),
]


def llmk(*args, env=None):
    e = dict(os.environ)
    e.pop("LLMK_ACT", None)
    e.update(env or {})
    return subprocess.run([LLMK, *args], capture_output=True, text=True, env=e, timeout=300)


@pytest.fixture(scope="module")
def prompt_ids():
    r = llmk("tokenize", "-m", str(MODEL), PROMPT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def tensors():
    import gguf

    return {t.name: (int(t.data_offset), t.tensor_type, int(t.shape[0])) for t in gguf.GGUFReader(str(MODEL)).tensors}


def corrupted(tmp_path, tensors, prompt_ids, name, where, bits):
    import gguf

    off, ttype, ne0 = tensors[name]
    bs = {gguf.GGMLQuantizationType.Q4_1: 20, gguf.GGMLQuantizationType.Q8_0: 34}[ttype]
    if isinstance(where, tuple):  # the first block of a token's row
        row = prompt_ids[where[1]] if where[0] == "prompt" else where[1]
        block = row * (ne0 // 32)
    else:
        block = where
    dst = tmp_path / MODEL.name
    shutil.copyfile(MODEL, dst)
    with open(dst, "r+b") as f:  # d, the block's f16 scale, comes first in Q4_1 and Q8_0
        f.seek(off + block * bs)
        f.write(struct.pack("<H", bits))
    return dst


def commands(model, ids, path):
    return [
        ("run", "-m", str(model), "--raw", "--path", path, "--temp", "0", "-n", "8", "-p", PROMPT, "-t", "2"),
        ("logits", "-m", str(model), "--path", path, "--ids", ",".join(map(str, ids)), "-t", "2",
         "--out", os.devnull),
    ]


@pytest.mark.parametrize("case,name,where,bits,phase", CASES, ids=[c[0] for c in CASES])
def test_nan_weight_fails(tmp_path, tensors, prompt_ids, case, name, where, bits, phase):
    model = corrupted(tmp_path, tensors, prompt_ids, name, where, bits)
    for path, env in (("fast", {}), ("fast", {"LLMK_ACT": "q8"}), ("f32", {})):
        for cmd in commands(model, prompt_ids, path):
            r = llmk(*cmd, env=env)
            what = f"{case}: {cmd[0]} --path {path} {env}"
            assert r.returncode == 1, f"{what}: exit {r.returncode}, stdout {r.stdout!r}, stderr {r.stderr!r}"
            assert "llmk_nan_input" in r.stderr, f"{what}: {r.stderr!r}"
            if path == "fast":  # the executor names where it met the value
                assert phase in r.stderr, f"{what}: {r.stderr!r}"


def test_unmodified_copy_runs(tmp_path, prompt_ids):
    model = tmp_path / MODEL.name
    shutil.copyfile(MODEL, model)
    for path, env in (("fast", {}), ("fast", {"LLMK_ACT": "q8"}), ("f32", {})):
        for cmd in commands(model, prompt_ids, path):
            r = llmk(*cmd, env=env)
            assert r.returncode == 0, f"{cmd[0]} --path {path} {env}: {r.stderr!r}"
            assert "llmk_nan_input" not in r.stderr
