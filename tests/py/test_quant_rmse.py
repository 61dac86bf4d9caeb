"""llmk's quantizers against ggml's reference quantizers, by error.

For the codecs where llmk's quantizer is its own (gguf-py has none to be
bit-identical to), the RMSE of dequant(quant(x)) - x over each fixed dataset in
tests/fixtures/quant/datasets.npz must be no worse than ggml's on the same data,
recorded in tests/fixtures/quant/ggml_rmse.json by tests/ref/ggml_quant_rmse.py
(ggml through llama-cpp-python; not needed here). The control codecs (Q4_0 ...
Q8_0) must be bit-identical to ggml's bytes, which checks the harness itself.

Library: the codec_lib fixture (tests/py/conftest.py).
Run with -s to see the table.
"""
import hashlib
import json
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "quant"
OK = 560

# GGUF type id, block elements, block bytes (src/codec/types.c)
CODECS = {
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292),
    "IQ4_NL": (20, 32, 18), "IQ4_XS": (23, 256, 136), "MXFP4": (39, 32, 17),
    "Q8_1": (9, 32, 36),
    "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20), "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24),
    "Q8_0": (8, 32, 34),
}
REL = 1e-6     # relative slack: summation-order noise in the RMSE itself
ABS = 1e-30    # absolute slack: lets 0 <= 0 pass; far below every non-zero dataset's error


@pytest.fixture(scope="module")
def lib(codec_lib):  # tests/py/conftest.py
    return codec_lib


@pytest.fixture(scope="module")
def data():
    sets = dict(np.load(FIX / "datasets.npz"))
    ref = json.loads((FIX / "ggml_rmse.json").read_text())
    assert ref["datasets_sha256"] == hashlib.sha256((FIX / "datasets.npz").read_bytes()).hexdigest(), \
        "datasets.npz changed since ggml_rmse.json was written: rerun tests/ref/ggml_quant_rmse.py ggml"
    return sets, ref


def llmk_roundtrip(lib, name, x):
    tid, be, bb = CODECS[name]
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    q = np.zeros(x.size // be * bb, dtype=np.uint8)
    assert lib.llmk_quantize_row(tid, x.ctypes.data, q.ctypes.data, x.size) == OK
    y = np.empty(x.size, dtype=np.float32)
    assert lib.llmk_dequantize_row(tid, q.ctypes.data, y.ctypes.data, x.size) == OK
    return q, y


def rmse(y, x):
    return float(np.sqrt(np.mean((y.astype(np.float64) - x.astype(np.float64).ravel()) ** 2)))


def compare(lib, sets, ref, name):
    rows = []
    for ds, x in sets.items():
        q, y = llmk_roundtrip(lib, name, x)
        g = ref[ds]
        same = [k for k in ("ref", "chunk") if k in g and hashlib.sha256(q.tobytes()).hexdigest() == g[k]["sha256"]]
        rows.append((ds, rmse(y, x), g["rmse"], same))
    return rows


def show(name, rows):
    print(f"\n{name}: {'dataset':<20} {'llmk':>11} {'ggml':>11} {'llmk/ggml':>9}  bit-identical")
    for ds, a, b, same in rows:
        ratio = f"{a / b:9.4f}" if b > 0 else ("      0/0" if a == 0 else "      inf")
        print(f"{'':>{len(name) + 1}} {ds:<20} {a:11.4e} {b:11.4e} {ratio}  {'/'.join(same)}")


@pytest.mark.parametrize("name", [n for n in CODECS if n not in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")])
def test_rmse_no_worse_than_ggml(lib, data, name):
    sets, ref = data
    rows = compare(lib, sets, ref["codecs"][name], name)
    show(name, rows)
    worse = [(ds, a, b) for ds, a, b, _ in rows if not a <= b * (1 + REL) + ABS]
    assert not worse, f"{name}: llmk's RMSE above ggml's on " + \
        ", ".join(f"{ds} ({a:.6g} > {b:.6g})" for ds, a, b in worse)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_controls_match_ggml(lib, data, name):
    """llmk's legacy quantizers are gguf-py's, bit for bit, and gguf-py mirrors
    ggml's reference; so llmk's bytes are ggml's, except that gguf-py (hence
    llmk) forms Q4_0/Q5_0's x / d product in f64 where ggml's C uses f32, which
    can round a value lying exactly on a rounding boundary the other way: seen
    in 1 block of 2304 (real_attn_q, Q4_0 and Q5_0) and 1 of 1536 (real_ffn_down,
    Q4_0), Q4_1-dequantized weights lying on such grids. So for those two a
    difference is allowed when the RMSE stays within 0.1 % of ggml's."""
    sets, ref = data
    tid, be, bb = CODECS[name]
    for ds, x in sets.items():
        q, y = llmk_roundtrip(lib, name, x)
        g = ref["controls"][name][ds]
        if hashlib.sha256(q.tobytes()).hexdigest() in (g["ref"]["sha256"], g["chunk"]["sha256"]):
            continue
        assert name in ("Q4_0", "Q5_0"), f"{name} {ds}: llmk's bytes differ from ggml's"
        a, b = rmse(y, x), g["rmse"]
        nblocks = q.size // bb
        assert abs(a - b) <= 1e-3 * b, f"{name} {ds}: rmse {a} vs ggml's {b}"
        print(f"{name} {ds}: bytes differ from ggml's (f64 vs f32 rounding tie), rmse {a:.6g} vs {b:.6g}"
              f" over {nblocks} blocks")
