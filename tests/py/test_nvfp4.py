"""NVFP4 codec (GGUF type 40, src/codec/nvfp4.h) against ml_dtypes, bit for
bit: the block scales are float8_e4m3fn casts of amax / 6 and the codes
float4_e2m1fn casts of x / scale, packed in ggml's layout (4 scale bytes, then
per 16-element sub-block 8 bytes: element j low nibble, j + 8 high nibble).
Dequantization against the same decode. Through the shared library's row
API (ctypes), and `llmk quantize --type nvfp4` on the default model.
"""
import os
import pathlib
import subprocess

import ml_dtypes
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"
NVFP4, OK, F32 = 40, 560, np.float32


@pytest.fixture(scope="module")
def lib(codec_lib):  # tests/py/conftest.py
    return codec_lib


def reference_blocks(x):
    """ml_dtypes' rounding of the same f32 steps, packed as ggml packs NVFP4."""
    sub = x.reshape(-1, 16)
    amax = np.abs(sub).max(axis=1, keepdims=True)
    scale = np.minimum(amax / F32(6), F32(448)).astype(ml_dtypes.float8_e4m3fn)
    d = scale.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = (sub / np.where(d > 0, d, F32(1))).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 15
    codes = np.where(d > 0, codes, 0).astype(np.uint8)
    packed = (codes[:, :8] | (codes[:, 8:] << 4)).reshape(-1, 4, 8)
    blocks = np.concatenate([scale.view(np.uint8).reshape(-1, 4), packed.reshape(-1, 32)], axis=1)
    return blocks.reshape(-1), (codes.view(np.uint8), d)


def reference_values(raw):
    b = raw.reshape(-1, 36)
    sc = b[:, :4].copy()
    d = np.where((sc == 0) | (sc == 0x7F), 0, sc & 0x7F).astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32)
    q = b[:, 4:].reshape(-1, 4, 8)
    codes = np.concatenate([q & 15, q >> 4], axis=2).astype(np.uint8)  # [block, sub, 16]
    vals = codes.view(ml_dtypes.float4_e2m1fn).astype(F32)
    return (vals * d[:, :, None]).reshape(-1)


def rows(seed=0):
    r = np.random.default_rng(seed)
    x = [r.standard_normal(1024), np.zeros(1024), np.full(1024, -2.5), r.standard_normal(1024) * 1e-3,
         r.standard_normal(1024) * 300, r.standard_normal(1024) * 1e4, r.standard_normal(1024) * 1e-7]
    spike = np.zeros(1024)
    spike[100] = 7.0
    x.append(spike)
    return np.concatenate(x).astype(F32)


def test_quantize_bits_vs_ml_dtypes(lib):
    x = rows()
    out = np.zeros(x.size // 64 * 36, np.uint8)
    assert lib.llmk_quantize_row(NVFP4, x.ctypes.data, out.ctypes.data, x.size) == OK
    want, _ = reference_blocks(x)
    assert np.array_equal(out, want)


def test_dequantize_vs_ml_dtypes(lib):
    r = np.random.default_rng(1)
    raw = r.integers(0, 256, size=(300, 36), dtype=np.uint8)
    raw[:, :4] &= 0x7F  # scale bytes as the encoder writes them (and 0x7f: read as 0)
    raw[0, :4] = [0, 0x7F, 1, 0x7E]
    raw = raw.reshape(-1)
    out = np.empty(300 * 64, F32)
    assert lib.llmk_dequantize_row(NVFP4, raw.ctypes.data, out.ctypes.data, out.size) == OK
    # equal values (ggml's table decodes the code for -0 as +0, ml_dtypes as -0)
    assert np.array_equal(out, reference_values(raw))


def test_round_trip_and_refusal(lib):
    x = rows(2)
    q = np.zeros(x.size // 64 * 36, np.uint8)
    lib.llmk_quantize_row(NVFP4, x.ctypes.data, q.ctypes.data, x.size)
    back = np.empty_like(x)
    lib.llmk_dequantize_row(NVFP4, q.ctypes.data, back.ctypes.data, x.size)
    assert np.array_equal(back, reference_values(q))
    # E2M1 over E4M3 scales: within a quarter of each sub-block's amax (plus the scale's own rounding)
    # (a block scale saturates at E4M3's 448, so values saturate at 6 * 448: the 1e4 row)
    sub_amax = np.repeat(np.abs(x.reshape(-1, 16)).max(axis=1), 16)
    ok = np.abs(back - x) <= 0.3 * sub_amax + 2.0 ** -9 * 6
    assert ok[sub_amax <= 6 * 448].all()
    assert np.abs(back).max() == 6 * 448
    assert lib.llmk_quantize_row(NVFP4, x.ctypes.data, q.ctypes.data, 63) != OK  # not whole blocks


def test_llmk_quantize_nvfp4(tmp_path):
    if not MODEL.exists() or not BIN.exists():
        pytest.skip("default model or llmk not available")
    out = tmp_path / "m.nvfp4.gguf"
    r = subprocess.run([str(BIN), "quantize", str(MODEL), str(out), "nvfp4", "--allow-requantize"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    # (gguf-py 0.17.1 does not know type 40 yet: llmk info reads the file back)
    info = subprocess.run([str(BIN), "info", str(out)], capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    assert "MOSTLY_NVFP4 (39)" in info.stdout  # LLAMA_FTYPE_MOSTLY_NVFP4
    assert any(line.split()[:1] == ["nvfp4"] for line in info.stdout.splitlines())
    run = subprocess.run([str(BIN), "run", "-m", str(out), "-p", "The capital of France is", "-n", "8",
                          "--temp", "0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
