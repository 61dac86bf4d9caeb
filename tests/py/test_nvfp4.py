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


# ------------------------------------------------------- per-tensor scale --

def scaled_api(lib):
    import ctypes
    lib.llmk_tensor_scale.restype = ctypes.c_float
    lib.llmk_tensor_scale.argtypes = [ctypes.c_uint32, ctypes.c_float]
    lib.llmk_quantize_row_scaled.restype = ctypes.c_int
    lib.llmk_quantize_row_scaled.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                             ctypes.c_float]
    return lib


def tensor_scale(x):
    """NVIDIA's per-tensor scale: amax / (6 * 448) in f32 (1 for an all-zero tensor)."""
    amax = F32(np.abs(x).max())
    return amax / F32(6 * 448) if amax > 0 else F32(1)


def test_scaled_quantize_bits_and_gain(lib):
    """The blocks of x / g equal ml_dtypes' casts of x / g; on weights of a
    realistic size (std 0.02) the scale keeps the block scales out of E4M3's
    subnormals, and the error drops."""
    lib = scaled_api(lib)
    x = (np.random.default_rng(3).standard_normal(1 << 14) * 0.02).astype(F32)
    g = tensor_scale(x)
    assert lib.llmk_tensor_scale(NVFP4, float(np.abs(x).max())) == g
    assert lib.llmk_tensor_scale(8, 1.0) == 1.0  # Q8_0 takes none
    out = np.zeros(x.size // 64 * 36, np.uint8)
    assert lib.llmk_quantize_row_scaled(NVFP4, x.ctypes.data, out.ctypes.data, x.size, float(g)) == OK
    want, _ = reference_blocks(x / g)
    assert np.array_equal(out, want)
    plain = np.zeros_like(out)
    lib.llmk_quantize_row(NVFP4, x.ctypes.data, plain.ctypes.data, x.size)
    err_scaled = np.linalg.norm(reference_values(out) * g - x)
    err_plain = np.linalg.norm(reference_values(plain) - x)
    print(f"\nrel L2 error: unscaled {err_plain / np.linalg.norm(x):.4f}, scaled {err_scaled / np.linalg.norm(x):.4f}")
    assert err_scaled < 0.97 * err_plain  # measured 0.93x (rel L2 0.093 vs 0.100)
    assert lib.llmk_quantize_row_scaled(8, x.ctypes.data, out.ctypes.data, 64, 0.5) != OK  # NVFP4 only


TAKES_SCALE = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "ffn_gate_exps",
               "ffn_up_exps", "ffn_down_exps")


def takes_scale(name):
    base = name[:-len(".weight")] if name.endswith(".weight") else None
    return base == "output" or (base is not None and base.startswith("blk.") and base.split(".", 2)[2] in TAKES_SCALE)


def expected_pure_nvfp4(name, w):
    """What `llmk quantize --pure ... nvfp4` stores for F32 tensor w, decoded
    by numpy and ml_dtypes: 2+ dims in whole 64-blocks NVFP4 (the blocks of
    w / g times g where the weight takes an X.scale), other 2+ dims F16,
    1-D and routers as they are."""
    if w.ndim < 2 or "ffn_gate_inp" in name:  # 1-D, and the routers (kept F32 below)
        return w
    if w.shape[-1] % 64:
        return w.astype(np.float16).astype(F32)
    flat = w.reshape(-1).astype(F32)
    g = tensor_scale(flat) if takes_scale(name) else F32(1)
    blocks, _ = reference_blocks(flat / g)
    return (reference_values(blocks) * g).astype(F32).reshape(w.shape)


@pytest.mark.parametrize("arch", ["qwen3", "qwen3moe"])
def test_tensor_scale_written_and_applied(arch, tmp_path):
    """`llmk quantize ... nvfp4` writes X.scale beside each projection, expert
    stack and LM head (llama.cpp's names), and every path multiplies X's
    products by it: the NVFP4 file's logits equal those of an F32 file whose
    weights numpy decoded from the same scaled blocks (ref path, 1e-5), and the
    f32 and fast paths follow the ref path as on other codecs."""
    from test_model_fixtures import THREADS, TINY, llmk
    from test_moe import rewrite

    src = os.path.join(TINY, f"tiny_{arch}.gguf")
    nv, want = str(tmp_path / "nv.gguf"), str(tmp_path / "want.gguf")
    # the routers stay F32: a tiny random model's expert choices are close
    # enough for the fast path's 8-bit activations to flip one otherwise
    llmk("quantize", src, nv, "nvfp4", "--pure", "--tensor-type", "ffn_gate_inp=f32")
    tensors = llmk("info", nv, "--tensors")
    n_scales = sum(1 for line in tensors.splitlines() if ".scale" in line)
    import gguf
    n_weights = sum(1 for t in gguf.GGUFReader(src).tensors if takes_scale(t.name) and t.shape[0] % 64 == 0)
    assert n_scales == n_weights > 0, tensors
    rewrite(src, want, tensor_fn=expected_pure_nvfp4)
    ids = list(range(3, 40, 3))

    def logits(model, path):
        out = str(tmp_path / f"{path}.f32")
        llmk("logits", "-m", model, "--ids", ",".join(map(str, ids)), "--path", path, "--out", out, *THREADS)
        return np.fromfile(out, dtype="<f4").reshape(len(ids), -1).astype(np.float64)

    def rel(a, b):
        return np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)

    ref = logits(nv, "ref")
    assert rel(ref, logits(want, "ref")).max() <= 1e-5
    f32 = logits(nv, "f32")
    assert rel(f32, ref).max() <= 1e-4
    fast = logits(nv, "fast")
    # the codec's dot on 8-bit activations, as other unrepacked codecs: measured 0.7-2.3e-2 by
    # position, and 0.10-0.12 where the tiny random MoE's 8-bit rounding flips an expert choice
    # (a scale left out would be off by its 1e-4-ish factor everywhere)
    r = rel(fast, f32)
    assert np.median(r) <= 3e-2 and r.max() <= 0.2
    assert (fast.argmax(1) == f32.argmax(1)).mean() >= 0.8


def test_scale_on_any_weight_type_and_refusals(tmp_path):
    """X.scale multiplies X's products whatever X's type: an F32 file whose
    attn_q and ffn_down carry scale 2 gives the ref path's logits of the same
    file with those weights doubled (exact in f32). A scale that is not one
    positive F32 value, or that sits beside a tensor that is not a matmul
    weight, is refused by name."""
    from test_model_fixtures import LLMK, THREADS, TINY, llmk
    from test_moe import rewrite

    src = os.path.join(TINY, "tiny_qwen3.gguf")
    ids = "3,5,7,11,13"
    scaled, doubled = str(tmp_path / "scaled.gguf"), str(tmp_path / "doubled.gguf")
    two = np.array([2.0], F32)
    rewrite(src, scaled, extra={"blk.0.attn_q.scale": two, "blk.1.ffn_down.scale": two})
    rewrite(src, doubled, tensor_fn=lambda n, a: a * F32(2) if n in ("blk.0.attn_q.weight", "blk.1.ffn_down.weight") else a)

    def logits(model, path):
        out = str(tmp_path / "l.f32")
        llmk("logits", "-m", model, "--ids", ids, "--path", path, "--out", out, *THREADS)
        return np.fromfile(out, dtype="<f4")

    for path in ("ref", "f32", "fast"):
        a, b, base = logits(scaled, path), logits(doubled, path), logits(src, path)
        assert np.array_equal(a, b) if path != "ref" else np.abs(a - b).max() <= 1e-6 * np.abs(b).max()
        assert np.abs(a - base).max() > 0.1

    bad = {"two values": ({"blk.0.attn_q.scale": np.array([2.0, 2.0], F32)}, "blk.0.attn_q.scale"),
           "negative": ({"blk.0.attn_q.scale": np.array([-1.0], F32)}, "not positive"),
           "on a norm": ({"blk.0.attn_norm.scale": two}, "not a matmul weight"),
           "on token_embd": ({"token_embd.scale": two}, "not a matmul weight"),
           "no weight": ({"blk.0.attn_q_nope.scale": two}, "not a matmul weight")}
    # a weight that already has a scale is not requantized under a second one
    f = str(tmp_path / "q.gguf")
    p = subprocess.run([LLMK, "quantize", scaled, f, "nvfp4", "--pure"], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "already has a scale blk.0.attn_q.scale" in p.stderr, p.stderr
    assert not os.path.exists(f)
    for what, (extra, msg) in bad.items():
        f = str(tmp_path / "bad.gguf")
        rewrite(src, f, extra=extra)
        p = subprocess.run([LLMK, "logits", "-m", f, "--ids", ids, "--out", str(tmp_path / "x.f32")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr, (what, p.stderr)
