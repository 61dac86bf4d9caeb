"""DSA kernels (src/kernels/dsa.h) against independent references: numpy for
the math (indexer scores, the Hadamard transform, a dense softmax over
exactly the selected rows), ml_dtypes for the FP8-E4M3FN / FP4-E2M1 rounding
(bit for bit), numpy's argsort for the top-k sets.

The C side is reached through `build/tests/test_dsa io OP DIR ...`, which
reads raw arrays from DIR and writes DIR/out.bin with the kernel table's
kernels (the C test checks those against the scalar references bit for bit).
"""
import os
import pathlib
import subprocess

import ml_dtypes
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
TOOL = BIN.parent / "tests" / "test_dsa"
F32 = np.float32


@pytest.fixture(scope="module", autouse=True)
def tool():
    if not TOOL.exists():
        pytest.skip(f"{TOOL} not built (make tests-bin)")


def run(tmp_path, op, args, out_dtype, out_n, **arrays):
    for name, a in arrays.items():
        np.ascontiguousarray(a).tofile(tmp_path / f"{name}.bin")
    r = subprocess.run([str(TOOL), "io", op, str(tmp_path), *map(str, args)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        return r
    return np.fromfile(tmp_path / "out.bin", dtype=out_dtype, count=out_n)


def rng(seed):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("nq", [1, 2, 5])
def test_indexer_scores(tmp_path, nq):
    r = rng(nq)
    H, D, N = 6, 40, 77
    q = r.standard_normal((nq, H, D)).astype(F32)
    k = r.standard_normal((N, D)).astype(F32)
    w = r.standard_normal((nq, H)).astype(F32)
    want = np.einsum("mhn,mh->mn", np.maximum(np.einsum("mhd,nd->mhn", q.astype(np.float64), k), 0), w)
    got = run(tmp_path, "scores", [nq, H, D, N], F32, nq * N, q=q, k=k, w=w).reshape(nq, N)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    dec = run(tmp_path, "decode", [nq, H, D, N], F32, nq * N, q=q, k=k, w=w)
    if nq <= 4:  # the decode form: the same bits
        assert np.array_equal(dec.reshape(nq, N).view(np.uint32), got.view(np.uint32))
    else:
        assert dec.returncode == 2 and "query rows" in dec.stderr


@pytest.mark.parametrize("ties", [False, True])
def test_topk_sets_equal_argsort(tmp_path, ties):
    r = rng(7 + ties)
    nq, N, k = 5, 3000, 512
    s = (r.standard_normal((nq, N)) * 10).astype(F32)
    if ties:  # a few hundred distinct values: ties across the threshold
        s = (np.floor(s * 8) + 0.5).astype(F32)
    s[0, :5] = -np.inf
    valid = np.array([N, N // 3, 100, 0, N - 1], dtype=np.int64)
    got = run(tmp_path, "topk", [nq, N, k, 1], np.int32, nq * k, s=s, valid=valid).reshape(nq, k)
    key = s.astype(ml_dtypes.bfloat16).astype(np.float64)  # the 16-bit scores ranked
    for m in range(nq):
        n = int(valid[m])
        order = np.lexsort((np.arange(n), -key[m, :n]))  # descending, lower index first among equals
        want = set(order[:k].tolist())
        row = got[m]
        assert set(row[row >= 0].tolist()) == want
        assert (row[len(want):] == -1).all()
        assert np.all(np.diff(row[:len(want)]) > 0)  # listed in increasing index order


def dense_attention(q, k, v, pk, pv, idx, sinks, pos0, window, scale, n_kv):
    nq, H, _ = q.shape
    per = H // n_kv
    out = np.zeros((nq, H, v.shape[2]))
    for m in range(nq):
        pos = pos0 + m
        local = list(range(max(0, pos - window + 1), pos + 1)) if window else []
        pooled = [int(i) for i in idx[m] if i >= 0]
        for h in range(H):
            g = h // per
            K = np.concatenate([k[local, g], pk[pooled, g]]).astype(np.float64)
            V = np.concatenate([v[local, g], pv[pooled, g]]).astype(np.float64)
            s = K @ q[m, h].astype(np.float64) * scale
            mx = max(s.max(initial=-np.inf), sinks[h] if sinks is not None else -np.inf)
            p = np.exp(s - mx)
            den = p.sum() + (np.exp(sinks[h] - mx) if sinks is not None else 0)
            out[m, h] = p @ V / den if len(s) else 0
    return out


@pytest.mark.parametrize("nq,window,topk,sinks,tile,split", [
    (1, 128, 512, True, 0, 0), (2, 16, 300, False, 128, 1), (5, 0, 64, True, 256, 3), (3, 40, 0, True, 0, 2)])
def test_sparse_attention_vs_dense(tmp_path, nq, window, topk, sinks, tile, split):
    r = rng(nq * 31 + topk)
    H, KV, dk, dv, n_local, n_pool, pos0, scale = 8, 2, 72, 48, 900, 4000, 700, 0.125
    q = r.standard_normal((nq, H, dk)).astype(F32)
    k = r.standard_normal((n_local, KV, dk)).astype(F32)
    v = r.standard_normal((n_local, KV, dv)).astype(F32)
    pk = r.standard_normal((n_pool, KV, dk)).astype(F32)
    pv = r.standard_normal((n_pool, KV, dv)).astype(F32)
    idx = np.stack([r.permutation(n_pool)[:topk] for _ in range(nq)]).astype(np.int32).reshape(nq, topk)
    if topk:
        idx[:, ::9] = -1  # unused slots
    sk = (r.standard_normal(H) * 2).astype(F32)
    args = [nq, pos0, H, KV, dk, dv, n_local, window, n_pool, topk, int(sinks), tile, split, int(scale * 1e6)]
    got = run(tmp_path, "attn", args, F32, nq * H * dv, q=q, k=k, v=v, pk=pk, pv=pv, idx=idx, sinks=sk)
    want = dense_attention(q, k, v, pk, pv, idx, sk if sinks else None, pos0, window, scale, KV)
    np.testing.assert_allclose(got.reshape(nq, H, dv), want, rtol=1e-4, atol=2e-6)


def test_sparse_attention_refuses_bad_index(tmp_path):
    q = np.zeros((1, 2, 8), F32)
    kv = np.zeros((4, 1, 8), F32)
    idx = np.array([[0, 4]], np.int32)
    r = run(tmp_path, "attn", [1, 3, 2, 1, 8, 8, 4, 2, 4, 2, 0, 0, 0, 1000000], F32, 16, q=q, k=kv, v=kv, pk=kv,
            pv=kv, idx=idx)
    assert r.returncode == 2 and "outside 4 pooled rows" in r.stderr


def blocks(x, n):
    return x.reshape(-1, n)


@pytest.mark.parametrize("f16", [0, 1])
def test_kv_qat_bits_vs_ml_dtypes(tmp_path, f16):
    r = rng(3)
    x = (r.standard_normal((24, 64)) * np.logspace(-6, 4, 24)[:, None]).astype(F32)
    x[5] = 0
    amax = np.abs(x).max(axis=1, keepdims=True)
    s = np.maximum(amax, F32(1e-4)) / F32(448)
    want = (x / s).astype(ml_dtypes.float8_e4m3fn).astype(F32) * s
    if f16:
        want = want.astype(np.float16).astype(F32)
    got = run(tmp_path, "kvqat", [x.size, f16], F32, x.size, x=x).reshape(x.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def hadamard128():
    h = np.array([[1.0]])
    while h.shape[0] < 128:
        h = np.block([[h, h], [h, -h]])
    return h


def test_indexer_qat_vs_numpy_and_ml_dtypes(tmp_path):
    r = rng(4)
    x = (r.standard_normal((10, 128)) * np.logspace(-3, 3, 10)[:, None]).astype(F32)
    x[2] = 0
    h = run(tmp_path, "hadamard", [x.size], F32, x.size, x=x).reshape(x.shape)
    want_h = x.astype(np.float64) @ hadamard128() / np.sqrt(128)
    assert (np.abs(h - want_h) <= 1e-5 * np.abs(x).max(axis=1, keepdims=True)).all()
    # the FP4 step on the kernel's own transform, bit for bit
    hb = blocks(h, 32)
    amax = np.abs(hb).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        v = amax / F32(6)
        mant, e = np.frexp(v)
        s = np.where(mant == 0.5, v, np.ldexp(F32(1), e).astype(F32)).astype(F32)
        want = np.where(amax > 0, (hb / s).astype(ml_dtypes.float4_e2m1fn).astype(F32) * s, hb).astype(F32)
    got = run(tmp_path, "idxqat", [x.size], F32, x.size, x=x)
    assert np.array_equal(got.view(np.uint32), want.reshape(-1).view(np.uint32))
    r2 = run(tmp_path, "idxqat", [100], F32, 100, x=x)
    assert r2.returncode == 2 and "whole blocks of 128" in r2.stderr
