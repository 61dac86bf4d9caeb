#!/usr/bin/env python3
"""Reference quantization error of ggml's own quantizers, for
tests/py/test_quant_rmse.py (which compares llmk's quantizers against it in CI
without llama.cpp).

Two steps, two interpreters:

1. data (needs numpy + gguf, i.e. the repository's .venv; reads the default model):
       .venv/bin/python tests/ref/ggml_quant_rmse.py data
   writes tests/fixtures/quant/datasets.npz: every dataset as f32 rows whose
   length is a multiple of 256. The random ones are numpy Generator(PCG64(seed))
   draws, the real ones tensors of SmolLM2-135M-Instruct.Q4_1.gguf dequantized
   by gguf-py. The values themselves are stored, so the test does not depend
   on numpy's stream staying the same across versions or on the model file.

2. ggml (needs only numpy and llama-cpp-python's shared libraries):
       /tmp/llamacpp-venv/bin/python tests/ref/ggml_quant_rmse.py ggml
   quantizes every dataset with ggml's reference quantizers
   (`quantize_row_<type>_ref`, exported by libggml-base.so, the functions
   ggml's type traits name as from_float_ref; for every type ggml_quantize_chunk
   accepts, the script checks that ggml_quantize_chunk with imatrix NULL
   writes the same bytes), dequantizes with ggml's to_float (Q8_1 has none:
   d * q in numpy) and writes tests/fixtures/quant/ggml_rmse.json: per codec
   and dataset the RMSE of dequant(quant(x)) - x and the sha256 of ggml's
   quantized bytes.

The venv for step 2 is what bench/compare.sh builds (any venv with
llama-cpp-python works; the library is located from the llama_cpp package):
    python3 -m venv /tmp/llamacpp-venv
    CMAKE_ARGS="-DGGML_NATIVE=ON" /tmp/llamacpp-venv/bin/pip install llama-cpp-python
The fixture was made with llama-cpp-python 0.3.36 (ggml 0.25.3); the version
is recorded in the JSON.
"""
import argparse
import ctypes
import hashlib
import json
import os
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "quant"
DATA = OUT / "datasets.npz"
JSON = OUT / "ggml_rmse.json"
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

# GGUF type id, block elements, block bytes. The first group is what the test
# compares by RMSE; the second is a control (llmk is bit-identical to gguf-py
# there, and gguf-py mirrors ggml's reference), checking the harness itself.
CODECS = {
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292),
    "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136), "MXFP4": (39, 32, 17),
    "Q8_1": (9, 32, 36),
}
CONTROLS = {
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
}


# ---- datasets ---------------------------------------------------------------------

def random_sets():
    """Seeded draws; each a (32, 512) array unless noted."""
    out = {}
    g = lambda seed: np.random.Generator(np.random.PCG64(seed))
    out["normal"] = g(1).standard_normal((32, 512))
    out["uniform"] = g(2).uniform(-1.0, 1.0, (32, 512))
    out["student_t3"] = g(3).standard_t(3.0, (32, 512))
    r = g(4)  # a magnitude 10^U(-6, 4) per 32-element block
    out["mixed_mag"] = r.standard_normal((32, 512)) * \
        np.repeat(10.0 ** r.uniform(-6.0, 4.0, (32, 16)), 32, axis=1)
    r = g(5)  # a magnitude 10^U(-3, 1) per 16-element sub-block
    out["mixed_mag_16"] = r.standard_normal((32, 512)) * \
        np.repeat(10.0 ** r.uniform(-3.0, 1.0, (32, 32)), 16, axis=1)
    r = g(6)  # 0.5 % outliers, 20..100 x the bulk, random sign
    x = r.standard_normal((32, 512))
    hit = r.random((32, 512)) < 0.005
    x[hit] = r.uniform(20.0, 100.0, hit.sum()) * r.choice([-1.0, 1.0], hit.sum())
    out["outliers"] = x
    r = g(7)  # one-sided and offset data (the affine codecs' min term)
    out["offset"] = np.concatenate([r.uniform(0.0, 1.0, (8, 512)), -r.uniform(0.0, 1.0, (8, 512)),
                                    r.standard_normal((8, 512)) * 0.1 + 1.0,
                                    r.standard_normal((8, 512)) * 0.1 - 1.0])
    return out


def adversarial_sets():
    """One row of 256 per pattern, each its own dataset (so the large rows do not
    hide the small ones); NaN-free and finite after f16 scaling."""
    r = np.random.Generator(np.random.PCG64(8))
    n = 256
    idx = np.arange(n)
    one32 = np.zeros(n)
    one32[np.arange(0, n, 32) + r.integers(0, 32, n // 32)] = r.standard_normal(n // 32) * 5
    one256 = np.zeros(n)
    one256[r.integers(0, n)] = -3.5
    spike = r.standard_normal(n) * 0.01
    spike[77] = 100.0
    rows = {
        "zeros": np.zeros(n), "const_pos": np.full(n, 3.25), "const_neg": np.full(n, -0.7),
        "const_6e4": np.full(n, 6e4), "one_per_32": one32, "one_per_256": one256, "spike": spike,
        "huge": np.clip(r.standard_normal(n) * 2e4, -6e4, 6e4), "small_1e-3": r.standard_normal(n) * 1e-3,
        "tiny_1e-6": r.standard_normal(n) * 1e-6, "tiny_1e-9": r.standard_normal(n) * 1e-9,
        "tiny_1e-20": r.standard_normal(n) * 1e-20, "alternating": np.tile([1.0, -1.0], n // 2),
        "integers": r.integers(-8, 8, n).astype(np.float64), "ramp": np.linspace(-1.0, 1.0, n),
        "half_zero": r.standard_normal(n) * (idx % 32 >= 16),
        "split_1e4_1e-4": np.where(idx % 2 == 0, 1e4, 1e-4) * r.choice([-1.0, 1.0], n),
        "cubed": r.standard_normal(n) ** 3, "sparse_100": np.where(idx % 37 == 0, 100.0, 0.01),
        "narrow_5_6": r.uniform(5.0, 6.0, n),
    }
    return {f"adv_{k}": v.reshape(1, n) for k, v in rows.items()}


def real_sets():
    from gguf import GGUFReader
    from gguf import quants as gq
    if not MODEL.exists():
        sys.exit(f"{MODEL} not found (scripts/fetch_model.sh)")
    rd = GGUFReader(str(MODEL))
    by = {t.name: t for t in rd.tensors}
    out = {}
    for key, name, nrows in (("real_token_embd", "token_embd.weight", 256),
                             ("real_attn_q", "blk.0.attn_q.weight", 128),
                             ("real_ffn_down", "blk.5.ffn_down.weight", 32)):
        t = by[name]
        w = gq.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        w = w.reshape(-1, int(t.shape[0]))[:nrows]  # first rows, each row whole
        out[key] = w.reshape(-1, 256)  # rows of 576 are not whole super-blocks: cut into 256s
    return out


def cmd_data(_):
    sets = {**random_sets(), **adversarial_sets(), **real_sets()}
    sets = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sets.items()}
    for k, v in sets.items():
        assert v.ndim == 2 and v.shape[1] % 256 == 0 and np.isfinite(v).all(), k
    OUT.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(DATA, **sets)
    print(f"{DATA}: {DATA.stat().st_size} bytes, " +
          ", ".join(f"{k} {v.shape[0]}x{v.shape[1]}" for k, v in sets.items()))


# ---- ggml --------------------------------------------------------------------------

class Traits(ctypes.Structure):  # struct ggml_type_traits (ggml.h)
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64),
                ("blck_size_interleave", ctypes.c_int64), ("type_size", ctypes.c_size_t),
                ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


ROWFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def load_ggml():
    import llama_cpp
    libdir = pathlib.Path(llama_cpp.__file__).parent / "lib"
    L = ctypes.CDLL(str(libdir / "libggml-base.so"))
    L.ggml_get_type_traits.restype = ctypes.POINTER(Traits)
    L.ggml_get_type_traits.argtypes = [ctypes.c_int]
    L.ggml_quantize_chunk.restype = ctypes.c_size_t
    L.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    L.ggml_quantize_init.argtypes = [ctypes.c_int]
    return L, llama_cpp.__version__


def ggml_dequant(L, name, tr, q, n):
    y = np.zeros(n, dtype=np.float32)
    if tr.to_float:
        ROWFN(tr.to_float)(q.ctypes.data, y.ctypes.data, n)
    elif name == "Q8_K":
        fn = L.dequantize_row_q8_K
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn(q.ctypes.data, y.ctypes.data, n)
    else:  # Q8_1 (no to_float): f16 d, f16 s, 32 x int8
        b = q.reshape(-1, 36)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(-1, 1)
        y = (b[:, 4:].view(np.int8).astype(np.float32) * d).ravel()
    return y


def ggml_codec(L, name, tid, be, bb, x):
    """{variant: (quantized bytes, dequantized values)} for rows x: "ref" is
    quantize_row_<type>_ref over all rows at once, "chunk" ggml_quantize_chunk
    (imatrix NULL), which llama-quantize calls, where ggml accepts the type."""
    tr = L.ggml_get_type_traits(tid).contents
    assert tr.blck_size == be and tr.type_size == bb, name
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = {}
    ref = getattr(L, f"quantize_row_{name.lower().replace('_k', '_K')}_ref")
    ref.restype = None
    ref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    q = np.zeros(x.size // be * bb, dtype=np.uint8)
    ref(x.ctypes.data, q.ctypes.data, x.size)
    out["ref"] = q
    if name not in ("Q8_1", "Q8_K"):  # the types ggml_quantize_chunk accepts
        L.ggml_quantize_init(tid)
        q = np.zeros(x.size // be * bb, dtype=np.uint8)
        L.ggml_quantize_chunk(tid, x.ctypes.data, q.ctypes.data, 0, x.shape[0], x.shape[1], None)
        out["chunk"] = q
    return {k: (q, ggml_dequant(L, name, tr, q, x.size).reshape(x.shape)) for k, q in out.items()}


def rmse(y, x):
    return float(np.sqrt(np.mean((y.astype(np.float64) - x.astype(np.float64)) ** 2)))


def cmd_ggml(_):
    L, version = load_ggml()
    sets = dict(np.load(DATA))
    res = {"generator": "tests/ref/ggml_quant_rmse.py", "llama_cpp_python": version,
           "datasets_sha256": hashlib.sha256(DATA.read_bytes()).hexdigest(),
           "codecs": {}, "controls": {}}
    for group, table in (("codecs", CODECS), ("controls", CONTROLS)):
        for name, (tid, be, bb) in table.items():
            per = {}
            for ds, x in sets.items():
                v = {k: {"rmse": rmse(y, x), "sha256": hashlib.sha256(q.tobytes()).hexdigest()}
                     for k, (q, y) in ggml_codec(L, name, tid, be, bb, x).items()}
                # the bar: the better of ggml's two entry points
                per[ds] = {"rmse": min(e["rmse"] for e in v.values()), **v}
            res[group][name] = per
            print(name, " ".join(f"{ds}={v['rmse']:.4g}" for ds, v in per.items()))
    JSON.write_text(json.dumps(res, indent=1, sort_keys=False) + "\n")
    print(f"wrote {JSON}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["data", "ggml"])
    a = ap.parse_args()
    {"data": cmd_data, "ggml": cmd_ggml}[a.step](a)


if __name__ == "__main__":
    main()
