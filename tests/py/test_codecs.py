"""Codec bit-exactness against gguf-py (PyPI `gguf`), driven through the
shared library with ctypes: llmk_dequantize_row / llmk_quantize_row are the
_ref kernels, so this compares them directly, block by block.

Library: the codec_lib fixture (tests/py/conftest.py).
"""
import os
import pathlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf import quants as gq

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

# (block elements, block bytes) per llmk codec, the facts in src/codec/types.c.
SIZES = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "Q4_0": (32, 18), "Q4_1": (32, 20),
    "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34), "Q8_1": (32, 36),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176),
    "Q6_K": (256, 210), "Q8_K": (256, 292), "IQ4_NL": (32, 18), "IQ4_XS": (256, 136),
    "MXFP4": (32, 17),
}
TYPE_ID = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8,
           "Q8_1": 9, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13, "Q6_K": 14,
           "Q8_K": 15, "IQ4_NL": 20, "IQ4_XS": 23, "BF16": 30, "MXFP4": 39}
# codecs gguf-py can dequantize / quantize (0.17.1)
GQ_DEQ = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K",
          "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"]
GQ_Q = ["F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]
OK = 560


@pytest.fixture(scope="module")
def lib(codec_lib):  # tests/py/conftest.py
    return codec_lib


def deq(lib, name, raw: np.ndarray) -> np.ndarray:
    be, bb = SIZES[name]
    raw = np.ascontiguousarray(raw, dtype=np.uint8).ravel()
    assert raw.size % bb == 0
    n = raw.size // bb * be
    out = np.empty(n, dtype=np.float32)
    st = lib.llmk_dequantize_row(TYPE_ID[name], raw.ctypes.data, out.ctypes.data, n)
    assert st == OK
    return out


def quant(lib, name, x: np.ndarray) -> np.ndarray:
    be, bb = SIZES[name]
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    out = np.zeros(x.size // be * bb, dtype=np.uint8)
    st = lib.llmk_quantize_row(TYPE_ID[name], x.ctypes.data, out.ctypes.data, x.size)
    assert st == OK
    return out


def gq_deq(name, raw):
    bb = SIZES[name][1]
    return gq.dequantize(raw.reshape(-1, bb) if bb > 2 else raw.reshape(-1).view(np.uint8),
                         T[name]).astype(np.float32).ravel()


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def adversarial(seed=0):
    """Rows of 1024 values: random scales, zeros, constants, huge and tiny
    magnitudes (NaN-free), a single spike, alternating signs."""
    r = np.random.default_rng(seed)
    rows = [r.standard_normal(1024), np.zeros(1024), np.full(1024, 3.25), np.full(1024, -0.7),
            r.standard_normal(1024) * 1e4, r.standard_normal(1024) * 6e4,
            r.standard_normal(1024) * 1e-3, r.standard_normal(1024) * 1e-6,
            r.standard_normal(1024) * 1e-30, r.uniform(0, 1, 1024), -r.uniform(0, 1, 1024),
            np.where(np.arange(1024) % 37 == 0, 100.0, 0.01), np.tile([1.0, -1.0], 512),
            r.standard_normal(1024) ** 3, r.integers(-8, 8, 1024).astype(np.float64)]
    return np.stack(rows).astype(np.float32)


@pytest.mark.parametrize("name", GQ_Q)
def test_quantize_matches_gguf_py(lib, name):
    x = adversarial(1)
    for row in x:
        want = gq.quantize(row.reshape(1, -1), T[name]).view(np.uint8).ravel()
        got = quant(lib, name, row)
        assert np.array_equal(got, want), f"{name}: first diff at byte {np.argmax(got != want)}"


@pytest.mark.parametrize("name", GQ_DEQ)
def test_dequantize_matches_gguf_py_on_quantized_data(lib, name):
    """Blocks produced by quantizing adversarial rows (llmk's quantizer for
    codecs gguf-py cannot quantize) dequantize bit-identically."""
    x = adversarial(2)
    for row in x:
        raw = quant(lib, name, row)
        assert same_bits(deq(lib, name, raw), gq_deq(name, raw))


@pytest.mark.parametrize("name", [n for n in GQ_DEQ if SIZES[n][0] > 1])
def test_dequantize_matches_gguf_py_on_random_blocks(lib, name):
    """Random bytes in every field (all scale/packing bits exercised), with
    the f16 scale fields forced finite."""
    be, bb = SIZES[name]
    r = np.random.default_rng(3)
    raw = r.integers(0, 256, size=(64, bb), dtype=np.uint8)
    # f16 scale positions per layout: keep them finite (exponent != 31)
    f16_at = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
              "IQ4_NL": [0], "IQ4_XS": [0], "Q2_K": [80, 82], "Q3_K": [108],
              "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}[name]
    for off in f16_at:
        raw[:, off + 1] &= 0x7b  # clear an exponent bit: never inf/NaN
    assert same_bits(deq(lib, name, raw), gq_deq(name, raw))


def test_model_tensors_dequantize_bit_exact(lib):
    if not MODEL.exists():
        pytest.skip("default model absent")
    rd = GGUFReader(str(MODEL))
    seen = set()
    for t in rd.tensors:
        name = t.tensor_type.name
        if name in seen and name != "Q4_1":
            continue
        seen.add(name)
        raw = np.asarray(t.data).view(np.uint8).ravel()
        if name == "F32":
            raw = np.asarray(t.data).astype(np.float32).view(np.uint8).ravel()
        raw = raw[: SIZES[name][1] * 1024]  # the first 1024 blocks of every tensor keep this fast
        assert same_bits(deq(lib, name, raw), gq_deq(name, raw)), t.name
    assert {"Q4_1", "Q8_0", "F32"} <= seen


def test_rejects_bad_arguments(lib):
    out = np.empty(32, dtype=np.float32)
    raw = np.zeros(18, dtype=np.uint8)
    assert lib.llmk_dequantize_row(2, raw.ctypes.data, out.ctypes.data, 31) != OK  # not whole blocks
    assert lib.llmk_dequantize_row(77, raw.ctypes.data, out.ctypes.data, 32) != OK  # unknown id
    assert lib.llmk_dequantize_row(16, raw.ctypes.data, out.ctypes.data, 256) != OK  # iq2_xxs: no codec
    assert lib.llmk_dequantize_row(2, None, out.ctypes.data, 32) != OK


# ---- llmk quantize ----------------------------------------------------------

def _write_src(path):
    import gguf
    r = np.random.default_rng(7)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_string("tokenizer.ggml.model", "gpt2")
    w.add_file_type(0)
    tensors = {
        "token_embd.weight": r.standard_normal((64, 512)).astype(np.float32),
        "blk.0.attn_norm.weight": r.standard_normal(512).astype(np.float32),
        "blk.0.attn_v.weight": r.standard_normal((32, 512)).astype(np.float16),
        "blk.0.attn_q.weight": r.standard_normal((48, 512)).astype(np.float32),
        "blk.0.ffn_down.weight": r.standard_normal((16, 256)).astype(np.float32),
        "blk.0.odd.weight": r.standard_normal((8, 96)).astype(np.float32),
    }
    for name, a in tensors.items():
        w.add_tensor(name, a)
    q = gq.quantize(r.standard_normal((8, 128)).astype(np.float32), T.Q4_1)
    w.add_tensor("blk.0.q41.weight", q, raw_dtype=T.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _run(*args):
    import subprocess
    return subprocess.run([str(BIN), "quantize", *map(str, args)], capture_output=True, text=True, timeout=120)


def _tensors(path):
    rd = GGUFReader(str(path))
    return rd, {t.name: t for t in rd.tensors}


@pytest.fixture(scope="module")
def src_gguf(tmp_path_factory):
    if not BIN.exists():
        pytest.skip(f"{BIN} not built")
    p = tmp_path_factory.mktemp("q") / "src.gguf"
    _write_src(p)
    return p


def _deq(t):
    return gq.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(-1)


def test_quantize_f32_is_exact_dequantization(src_gguf, tmp_path):
    out = tmp_path / "f32.gguf"
    res = _run(src_gguf, out, "F32")
    assert res.returncode == 0, res.stderr
    _, src = _tensors(src_gguf)
    rd, dst = _tensors(out)
    assert set(src) == set(dst)
    for name, t in dst.items():
        assert t.tensor_type == T.F32, name
        assert same_bits(_deq(t), _deq(src[name])), name
    assert int(rd.fields["general.file_type"].parts[-1][0]) == 0
    assert bytes(rd.fields["tokenizer.ggml.model"].parts[-1]).decode() == "gpt2"


def test_quantize_q4_k_m_policy_and_quality(src_gguf, tmp_path):
    out = tmp_path / "q4km.gguf"
    res = _run(src_gguf, out, "q4_k_m", "--allow-requantize")  # blk.0.q41 is q4_1
    assert res.returncode == 0, res.stderr
    _, src = _tensors(src_gguf)
    rd, dst = _tensors(out)
    # llama-quantize's rules: with one layer, layer 0 is in the last eighth
    # (use_more_bits), so attn_v and ffn_down get q6_k; token_embd is the
    # output here (no output.weight): q6_k
    want = {"token_embd.weight": T.Q6_K, "blk.0.attn_norm.weight": T.F32,
            "blk.0.attn_v.weight": T.Q6_K, "blk.0.ffn_down.weight": T.Q6_K,
            "blk.0.attn_q.weight": T.Q4_K, "blk.0.odd.weight": T.Q5_0,
            "blk.0.q41.weight": T.Q5_0}
    for name, ty in want.items():
        assert dst[name].tensor_type == ty, (name, dst[name].tensor_type)
        a, b = _deq(src[name]), _deq(dst[name])
        rel = np.sqrt(np.mean((a - b) ** 2) / np.mean(a ** 2))
        assert rel < 0.08, (name, rel)
    assert int(rd.fields["general.file_type"].parts[-1][0]) == 15
    assert int(rd.fields["llama.block_count"].parts[-1][0]) == 1


def test_quantize_pure_and_overrides(src_gguf, tmp_path):
    out = tmp_path / "pure.gguf"
    res = _run(src_gguf, out, "Q4_K_M", "--pure", "--tensor-type", "attn_q=q8_0", "--allow-requantize")
    assert res.returncode == 0, res.stderr
    _, dst = _tensors(out)
    assert dst["blk.0.attn_q.weight"].tensor_type == T.Q8_0
    assert dst["blk.0.attn_v.weight"].tensor_type == T.Q4_K   # no bump under --pure
    assert dst["token_embd.weight"].tensor_type == T.Q4_K
    assert dst["blk.0.odd.weight"].tensor_type == T.F16      # 96 is not whole 256-blocks
    assert dst["blk.0.attn_norm.weight"].tensor_type == T.F32


def test_quantize_refuses_bad_input(src_gguf, tmp_path):
    assert _run(src_gguf, tmp_path / "x.gguf", "q9_9").returncode == 2
    assert _run(src_gguf, tmp_path / "x.gguf").returncode == 2
    assert _run(src_gguf, tmp_path / "x.gguf", "q8_0", "--tensor-type", "noequals").returncode == 2
    assert _run(tmp_path / "missing.gguf", tmp_path / "x.gguf", "q8_0").returncode == 1
    assert _run("-h").returncode == 0
