"""Codec bit-exactness against gguf-py (PyPI `gguf`), driven through the
shared library with ctypes: llmk_dequantize_row / llmk_quantize_row are the
_ref kernels, so this compares them directly, block by block.

Library: $LLMK_LIB, else libllmk.so next to $LLMK_BIN (default build/llmk).
"""
import ctypes
import os
import pathlib

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf import quants as gq

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
LIB = pathlib.Path(os.environ.get("LLMK_LIB", BIN.parent / "libllmk.so"))
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
def lib():
    if not LIB.exists():
        pytest.skip(f"{LIB} not built")
    L = ctypes.CDLL(str(LIB))
    for f in (L.llmk_dequantize_row, L.llmk_quantize_row):
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return L


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
        raw = raw[: SIZES[name][1] * 4096 // SIZES[name][0] * SIZES[name][0]] if raw.size > 1 << 20 else raw
        assert same_bits(deq(lib, name, raw), gq_deq(name, raw)), t.name
    assert {"Q4_1", "Q8_0", "F32"} <= seen


def test_rejects_bad_arguments(lib):
    out = np.empty(32, dtype=np.float32)
    raw = np.zeros(18, dtype=np.uint8)
    assert lib.llmk_dequantize_row(2, raw.ctypes.data, out.ctypes.data, 31) != OK  # not whole blocks
    assert lib.llmk_dequantize_row(77, raw.ctypes.data, out.ctypes.data, 32) != OK  # unknown id
    assert lib.llmk_dequantize_row(16, raw.ctypes.data, out.ctypes.data, 256) != OK  # iq2_xxs: no codec
    assert lib.llmk_dequantize_row(2, None, out.ctypes.data, 32) != OK
