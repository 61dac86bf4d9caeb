"""The r8 record forms through the whole fast path: K-quant weights repacked
into the compact forms (Q4K, Q8K; src/kernels/r8.h), which the AVX-512
kernels read where the CPU has VNNI, give the very logits of the portable
forms (LLMK_RECORDS=portable), for A16 and A8 activations, dense matmuls
and MoE expert stacks, one thread or two. On a CPU without the compact
forms both runs take the portable ones and the check still holds.

The model: a small qwen3moe of random weights (bench/make_moe_model.py,
hidden 256 so that every matrix holds K-quant blocks), quantized by
`llmk quantize` to Q4_K_M (Q4_K and Q6_K tensors: Q4K, Q6C), to IQ4_XS and Q3_K_M
(XS4, and Q3_K in Q3C), to IQ4_NL (NL4), to Q5_K_M (Q8M), to Q5_0 (Q5C),
to Q4_0 (Q40), to Q2_K (Q2C, and Q3C) and to Q5_1 (Q51), experts included for Q4_K_M,
Q5_0 and Q4_0: their portable records pass the planner's size test too.
The other files keep their expert stacks in Q8_0: an MoE stack takes the r8 kernels only
where its records are at most 1.7x the file (src/plan.c), which those
types' are in their compact forms and not in the portable ones, so there
the form decides the route and with it the bits."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLMK = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))


def run(*args, env=None):
    return subprocess.run([LLMK, *args], check=True, capture_output=True, timeout=300,
                          env=None if env is None else {**os.environ, **env}).stdout


PRESETS = ("q4_k_m", "iq4_xs", "q3_k_m", "iq4_nl", "q5_k_m", "q5_0", "q4_0", "q2_k", "q5_1", "mxfp4")
# a preset's quantize arguments beyond its name: experts kept in Q8_0 where the
# type has no A8 form or none that fits the planner's size test; "mxfp4" is
# Q8_0 with MXFP4 experts and output projections (MXC records: dense and MoE)
EXTRA = {"mxfp4": ("q8_0", "--tensor-type", "_exps=mxfp4", "--tensor-type", "attn_output=mxfp4")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("records")
    f16 = d / "moe_f16.gguf"
    subprocess.run([sys.executable, str(ROOT / "bench" / "make_moe_model.py"), str(f16), "--hidden", "256",
                    "--layers", "2", "--experts", "4", "--top-k", "2", "--ffn-exp", "256"], check=True,
                   capture_output=True, timeout=300)
    out = {}
    for preset in PRESETS:
        q = d / f"moe_{preset}.gguf"
        if preset in EXTRA:
            base, *extra = EXTRA[preset]
        else:
            base = preset
            extra = ("--tensor-type", "_exps=q8_0") if preset.startswith(("iq4", "q5_k", "q5_1", "q2", "q3")) else ()
        run("quantize", str(f16), str(q), base, "--log-disable", *extra)
        out[preset] = q
    return out


def logits(model, ids, records, threads=2, act="a16"):
    raw = run("logits", "-m", str(model), "--ids", ",".join(map(str, ids)), "--path", "fast", "-t", str(threads),
              env={"LLMK_RECORDS": records, "LLMK_ACT": act})
    return np.frombuffer(raw, dtype="<f4").reshape(len(ids), -1)


IDS = [(i * 7919 + 17) % 480 for i in range(40)]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("act", ["a16", "a8"])
def test_compact_records_change_no_bit(models, preset, act):
    portable = logits(models[preset], IDS, "portable", act=act)
    assert np.isfinite(portable).all()
    assert np.array_equal(logits(models[preset], IDS, "auto", act=act), portable)
    assert np.array_equal(logits(models[preset], IDS, "auto", threads=1, act=act), portable)


def test_bad_lever_is_refused(models):
    r = subprocess.run([LLMK, "logits", "-m", str(models["q4_k_m"]), "--ids", "1,2"], capture_output=True, text=True,
                       env={**os.environ, "LLMK_RECORDS": "small"}, timeout=60)
    assert r.returncode != 0
    assert "LLMK_RECORDS=small" in r.stderr
