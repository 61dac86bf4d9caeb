"""`llmk plan`: KV/weight figures checked against a hand computation from the
file's own metadata (read with gguf-py, not llmk), explicit-number mode, and
every kind of bad input."""
import json
import os
import subprocess
from pathlib import Path

import gguf
import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
SAN_BIN = os.environ.get("LLMK_SAN_BIN")
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"


def plan(*args, binary=BIN):
    return subprocess.run([binary, "plan", *map(str, args)], capture_output=True, text=True,
                          timeout=60)


def plan_json(*args, binary=BIN):
    r = plan(*args, "--json", binary=binary)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    part = f.parts[f.data[0]]
    if f.types and f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(part).decode()
    return int(part[0])


@pytest.fixture(scope="module")
def meta():
    if not MODEL.exists():
        pytest.skip(f"default model {MODEL} not present")
    r = gguf.GGUFReader(str(MODEL))
    arch = field(r, "general.architecture")
    heads = field(r, f"{arch}.attention.head_count")
    key_len = field(r, f"{arch}.attention.key_length")
    return {
        "arch": arch,
        "layers": field(r, f"{arch}.block_count"),
        "kv_heads": field(r, f"{arch}.attention.head_count_kv") or heads,
        "head_dim": key_len or field(r, f"{arch}.embedding_length") // heads,
        "weight_bytes": sum(int(t.n_bytes) for t in r.tensors),
        "n_tensors": len(r.tensors),
    }


def test_default_model_ctx_2048(meta):
    # K and V, one sequence, 2048 positions, f16 (2 bytes).
    per_layer = 2 * 1 * 2048 * meta["kv_heads"] * meta["head_dim"] * 2
    total = meta["layers"] * per_layer
    out = plan_json("-m", MODEL, "--ctx", 2048)
    assert out["kv_bytes_per_layer"] == per_layer
    assert out["kv_bytes_total"] == total
    assert out["n_layers"] == meta["layers"]
    assert out["n_kv_heads"] == meta["kv_heads"]
    assert out["head_dim"] == meta["head_dim"]
    assert out["weight_bytes"] == meta["weight_bytes"]
    assert out["n_tensors"] == meta["n_tensors"]
    assert out["blocks_per_sequence"] == 2048 // 128  # the runtime's block (LLMK_KV_BLOCK)
    # The text form prints the same figures.
    r = plan("-m", MODEL, "--ctx", 2048)
    assert r.returncode == 0, r.stderr
    assert f"{total} bytes" in r.stdout
    assert f"{per_layer} bytes" in r.stdout
    assert f"{meta['weight_bytes']} bytes" in r.stdout


def test_prefix_savings_count_whole_blocks(meta):
    """The runtime shares whole blocks only: a 500-token prefix saves 384."""
    L, H, D = meta["layers"], meta["kv_heads"], meta["head_dim"]
    out = plan_json("-m", MODEL, "--ctx", 2048, "--batch", 8, "--prefix", 500)
    assert out["block_size"] == 128
    assert out["prefix_sharing_savings_bytes"] == 7 * L * 2 * 384 * H * D * 2
    r = plan("-m", MODEL, "--ctx", 2048, "--batch", 8, "--prefix", 500)
    assert "384 in whole blocks" in r.stdout and "prefix cache" in r.stdout


def test_kv_types_batch_blocks_prefix_speculative(meta):
    L, H, D = meta["layers"], meta["kv_heads"], meta["head_dim"]
    for kv_type, nbytes in (("f32", 4), ("f16", 2), ("q8_0", 34 / 32)):
        out = plan_json("-m", MODEL, "--ctx", 1000, "--batch", 3, "--kv-type", kv_type)
        assert out["kv_bytes_per_layer"] == 2 * 3 * 1000 * H * D * nbytes
        assert out["kv_bytes_total"] == L * 2 * 3 * 1000 * H * D * nbytes
    out = plan_json("-m", MODEL, "--ctx", 2049, "--batch", 4, "--block-size", 16,
                    "--prefix", 512, "--accept-rate", 0.8, "--draft-depth", 4)
    assert out["blocks_per_sequence"] == 129          # ceil(2049 / 16)
    assert out["blocks_total"] == 4 * 129
    assert out["paged_kv_bytes_total"] == 4 * 129 * L * 2 * 16 * H * D * 2
    assert out["prefix_sharing_savings_bytes"] == 3 * L * 2 * 512 * H * D * 2
    expected = (1 - 0.8 ** 5) / (1 - 0.8)
    assert out["expected_tokens_per_step"] == pytest.approx(expected, rel=1e-12)
    assert out["speculative_speedup"] == pytest.approx(expected / (1 + 4 * 0.1), rel=1e-12)


def test_explicit_numbers_qwen3_0_6b():
    # Seed 001's worked example: 8 MiB per layer, 224 MiB over 28 layers.
    out = plan_json("--layers", 28, "--kv-heads", 8, "--head-dim", 128, "--ctx", 2048)
    assert out["kv_bytes_per_layer"] == 8388608
    assert out["kv_bytes_total"] == 234881024
    assert "weight_bytes" not in out


def write_gguf(path, arch="llama", **kv):
    w = gguf.GGUFWriter(str(path), arch)
    for key, val in kv.items():
        w.add_uint32(f"{arch}.{key.replace('__', '.')}", val)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_metadata_variants(tmp_path):
    # key_length overrides embedding_length / head_count; head_count_kv defaults to head_count.
    p = tmp_path / "kl.gguf"
    write_gguf(p, block_count=4, embedding_length=512, attention__head_count=8,
               attention__head_count_kv=2, attention__key_length=128)
    out = plan_json("-m", p, "--ctx", 10)
    assert (out["n_layers"], out["n_kv_heads"], out["head_dim"]) == (4, 2, 128)
    assert out["kv_bytes_total"] == 4 * 2 * 10 * 2 * 128 * 2
    assert out["weight_bytes"] == 0
    p = tmp_path / "mha.gguf"
    write_gguf(p, arch="qwen2", block_count=2, embedding_length=96, attention__head_count=3)
    out = plan_json("-m", p, "--ctx", 7)
    assert (out["arch"], out["n_kv_heads"], out["head_dim"]) == ("qwen2", 3, 32)


@pytest.mark.parametrize("kv", [
    dict(embedding_length=512, attention__head_count=8),               # no block_count
    dict(block_count=4, attention__head_count=8),                      # no embedding_length
    dict(block_count=4, embedding_length=512, attention__head_count=0),
    dict(block_count=4, embedding_length=500, attention__head_count=8),  # not a multiple
])
def test_bad_metadata(tmp_path, kv):
    p = tmp_path / "bad.gguf"
    write_gguf(p, **kv)
    r = plan("-m", p, "--ctx", 10)
    assert r.returncode == 1
    assert "llmk_bad_hyperparameter" in r.stderr


def test_unreadable_model(tmp_path):
    r = plan("-m", tmp_path / "missing.gguf", "--ctx", 10)
    assert r.returncode == 1 and "missing.gguf" in r.stderr
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all" * 4)
    r = plan("-m", junk, "--ctx", 10)
    assert r.returncode == 1 and "error" in r.stderr


EXPLICIT = ["--layers", "2", "--kv-heads", "2", "--head-dim", "8"]


@pytest.mark.parametrize("args,needle", [
    ([*EXPLICIT], "--ctx"),
    ([*EXPLICIT, "--ctx", "0"], "--ctx"),
    ([*EXPLICIT, "--ctx", "-5"], "--ctx"),
    ([*EXPLICIT, "--ctx", "12abc"], "--ctx"),
    ([*EXPLICIT, "--ctx", "99999999999999999999"], "--ctx"),
    ([*EXPLICIT, "--ctx", "8", "--batch", "0"], "--batch"),
    ([*EXPLICIT, "--ctx", "8", "--kv-type", "q4_0"], "--kv-type"),
    ([*EXPLICIT, "--ctx", "8", "--block-size", "0"], "--block-size"),
    ([*EXPLICIT, "--ctx", "8", "--prefix", "9"], "--prefix"),
    ([*EXPLICIT, "--ctx", "8", "--accept-rate", "1.5"], "--accept-rate"),
    ([*EXPLICIT, "--ctx", "8", "--accept-rate", "nan"], "--accept-rate"),
    ([*EXPLICIT, "--ctx", "8", "--draft-depth", "3"], "--accept-rate"),
    (["--layers", "2", "--ctx", "8"], "--head-dim"),
    (["--layers", "0", "--kv-heads", "2", "--head-dim", "8", "--ctx", "8"], "--layers"),
    (["-m", "x.gguf", *EXPLICIT, "--ctx", "8"], "not both"),
    ([*EXPLICIT, "--ctx", "8", "--frobnicate"], "--frobnicate"),
    ([*EXPLICIT, "--ctx"], "--ctx"),
])
def test_bad_usage(args, needle):
    r = plan(*args)
    assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert needle in r.stderr
    assert r.stdout == ""


def test_help():
    r = plan("-h")
    assert r.returncode == 0 and "--ctx" in r.stdout


@pytest.mark.skipif(not SAN_BIN or not Path(SAN_BIN).exists(), reason="no sanitizer build")
def test_sanitizer_build(tmp_path):
    out = plan_json("--layers", 28, "--kv-heads", 8, "--head-dim", 128, "--ctx", 2048,
                    "--prefix", 100, "--batch", 2, "--accept-rate", 0.8, binary=SAN_BIN)
    assert out["kv_bytes_total"] == 2 * 234881024
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\xff" * 60)
    r = plan("-m", junk, "--ctx", 10, binary=SAN_BIN)
    assert r.returncode == 1
    if MODEL.exists():
        assert plan("-m", MODEL, "--ctx", 64, binary=SAN_BIN).returncode == 0
