"""llmk quantize's presets choose, tensor by tensor, the types llama.cpp's
llama-quantize chose for the same f32 source (tests/fixtures/quant_presets.json,
written by tests/fixtures/make_quant_presets.py with llama-quantize itself).
Also: a quantized input is refused without --allow-requantize (as
llama-quantize does), and the command ends with a summary table, not a line
per tensor."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "quant_presets.json").read_text())

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")


def llmk(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def f32(tmp_path_factory):
    out = tmp_path_factory.mktemp("q") / "f32.gguf"
    r = llmk("quantize", MODEL, out, "f32")  # dequantizing needs no --allow-requantize
    assert r.returncode == 0, r.stderr
    return out


def dry_run_types(src, preset):
    r = llmk("quantize", src, src.parent / "never.gguf", preset, "--dry-run", "-v")
    assert r.returncode == 0, r.stderr
    assert not (src.parent / "never.gguf").exists()
    types = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] == "->":
            types[parts[0]] = parts[3]
    return types, r.stdout


@pytest.mark.parametrize("preset", sorted(FIXTURE["presets"]))
def test_preset_matches_llama_quantize(f32, preset):
    want = FIXTURE["presets"][preset]
    got, out = dry_run_types(f32, preset.lower())
    assert len(got) == 272, out
    mismatch = {n: (t, want["other"].get(n, want["default"])) for n, t in got.items()
                if t != "f32" and t != want["other"].get(n, want["default"])}
    assert not mismatch, f"{preset}: llmk vs llama-quantize {mismatch}"
    # every non-f32 tensor of the fixture is accounted for
    assert {n for n, t in got.items() if t != "f32"} >= set(want["other"])
    assert "dry run: 272 tensors" in out


def test_requantize_refused_without_the_flag(tmp_path):
    out = tmp_path / "out.gguf"
    r = llmk("quantize", MODEL, out, "q4_k_m")
    assert r.returncode == 1 and not out.exists(), r.stderr
    assert "llmk_invalid_argument" in r.stderr and "already q4_1" in r.stderr and "--allow-requantize" in r.stderr
    r = llmk("quantize", MODEL, out, "q8_0", "--allow-requantize")
    assert r.returncode == 0 and out.exists(), r.stderr
    # the summary table, not 272 lines
    lines = r.stdout.splitlines()
    assert len(lines) < 10, r.stdout
    assert lines[0].split() == ["type", "tensors", "MiB"]
    rows = {l.split()[0]: int(l.split()[1]) for l in lines[1:-1]}
    assert rows == {"f32": 61, "q8_0": 211}, r.stdout
    assert "272 tensors" in lines[-1]
    v = llmk("quantize", MODEL, tmp_path / "v.gguf", "q8_0", "--allow-requantize", "-v")
    assert sum(len(l.split()) == 4 and l.split()[2] == "->" for l in v.stdout.splitlines()) == 272


def test_same_type_is_not_a_requantization(tmp_path):
    # the q4_1 preset on the q4_1 model (its tied token_embd stays q8_0, as
    # llama-quantize would choose): nothing is quantized again, no flag needed
    r = llmk("quantize", MODEL, tmp_path / "same.gguf", "q4_1")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args", [("q8_0",), ("q8_0", "--pure"), ("q8_0", "--tensor-type", "ffn_gate_inp=q8_0"),
                                  ("q4_k_m",)])
def test_moe_router_is_never_quantized(args, tmp_path):
    """As llama-quantize: the router (ffn_gate_inp) keeps its type whatever
    the preset, --pure or an override asks, while the experts are converted."""
    src = ROOT / "tests" / "fixtures" / "model" / "tiny" / "tiny_qwen3moe.gguf"
    r = llmk("quantize", src, tmp_path / "never.gguf", *args, "--dry-run", "-v", "--allow-requantize")
    assert r.returncode == 0, r.stderr
    types = {ln.split()[0]: ln.split()[-1] for ln in r.stdout.splitlines()
             if ln.startswith("blk.") and "->" in ln}
    routers = [n for n in types if "ffn_gate_inp" in n]
    assert routers and all(types[n] == "f32" for n in routers), types
    assert types["blk.0.ffn_gate_exps.weight"] != "f32", types
