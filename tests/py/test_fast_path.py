"""The fast path (fused-phase executor, int16 activations by default) against the f32 path
on the default model, through `llmk logits`: teacher-forced logits over a few
sequences, argmax agreement and KL(f32 || fast): issue 5's acceptance,
argmax identical on >= 99% of positions, mean KL <= 1e-3. The figures are printed
(pytest -s). Also: the fast path's logits do not depend on the thread count,
and --path/-t are accepted by the compute subcommands."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LLMK = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = pathlib.Path(os.environ.get("LLMK_MODELS", pathlib.Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not downloaded")

TEXTS = [
    (ROOT / "tests" / "fixtures" / "text" / "lighthouse.txt").read_text()[:700],
    "The three most useful things to know about the ocean are",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
]


def run(*args, env=None):
    return subprocess.run([LLMK, *args], check=True, capture_output=True,
                          env=None if env is None else {**os.environ, **env}).stdout


def tokenize(text):
    return json.loads(run("tokenize", "-m", str(MODEL), "--special", text))


def logits(ids, path, threads=2, kv="f32", env=None):
    raw = run("logits", "-m", str(MODEL), "--ids", ",".join(map(str, ids)), "--path", path, "-t", str(threads),
              "--kv-type", kv, env=env)
    return np.frombuffer(raw, dtype="<f4").reshape(len(ids), -1).astype(np.float64)


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


@pytest.fixture(scope="module")
def pairs():
    out = []
    for t in TEXTS:
        ids = tokenize(t)[:160]
        out.append((ids, logits(ids, "f32"), logits(ids, "fast")))
    return out


def test_fast_matches_f32(pairs):
    agree = total = 0
    kls = []
    for ids, ref, fast in pairs:
        assert np.isfinite(fast).all()
        lp, lq = log_softmax(ref), log_softmax(fast)
        kls.extend((np.exp(lp) * (lp - lq)).sum(axis=1))
        agree += int((ref.argmax(axis=1) == fast.argmax(axis=1)).sum())
        total += len(ids)
    kl = np.array(kls)
    print(f"\nfast vs f32: {len(pairs)} sequences, {total} positions: argmax agree {agree}/{total} "
          f"({100.0 * agree / total:.2f}%), KL mean {kl.mean():.3g}, max {kl.max():.3g}")
    # Issue 5's acceptance. Measured with the default int16 activations
    # (src/kernels/a16.h): 100% / KL ~1e-7; the 8-bit path (LLMK_ACT=q8)
    # gives 95-96.5% / 3e-3 and would fail here.
    assert agree >= 0.99 * total
    assert kl.mean() <= 1e-3


def agreement(pairs, fasts):
    """(argmax agreement, positions, mean KL(f32 || fast)) over pairs' f32 logits."""
    agree = total = 0
    kls = []
    for (ids, ref, _), fast in zip(pairs, fasts):
        lp, lq = log_softmax(ref), log_softmax(fast)
        kls.extend((np.exp(lp) * (lp - lq)).sum(axis=1))
        agree += int((ref.argmax(axis=1) == fast.argmax(axis=1)).sum())
        total += len(ids)
    return agree, total, float(np.mean(kls))


def test_a8_activations_as_accurate_as_q8(pairs):
    """LLMK_ACT=a8 (8-bit activations into the repacked Q4_1 kernels,
    src/kernels/a8.h) trades the int16 activations' accuracy for speed: it is
    to be as close to the f32 path as the codecs' 8-bit activations
    (LLMK_ACT=q8, llama.cpp's precision), measured in the same run, and its
    logits independent of the thread count. Measured (Zen 5, the Q8_0 LM head
    on A8 too): a8 194/202 argmax, KL 3.1e-3; q8 194/202, KL 3.0e-3."""
    a8 = [logits(ids, "fast", env={"LLMK_ACT": "a8"}) for ids, _, _ in pairs]
    q8 = [logits(ids, "fast", env={"LLMK_ACT": "q8"}) for ids, _, _ in pairs]
    (ga, n, ka), (gq, _, kq) = agreement(pairs, a8), agreement(pairs, q8)
    print(f"\na8 vs f32: argmax {ga}/{n}, KL {ka:.3g}; q8 vs f32: argmax {gq}/{n}, KL {kq:.3g}")
    assert all(np.isfinite(f).all() for f in a8)
    assert not np.array_equal(a8[0], pairs[0][2])  # a different path from the default int16 one
    assert ka <= 1.5 * kq and ga >= gq - 0.01 * n
    assert np.array_equal(logits(pairs[1][0], "fast", threads=1, env={"LLMK_ACT": "a8"}), a8[1])


def test_fast_thread_count_bitwise(pairs):
    ids, _, fast2 = pairs[1]
    fast1 = logits(ids, "fast", threads=1)
    assert np.array_equal(fast1, fast2)


def test_bench_json_keys():
    out = json.loads(run("bench", "-m", str(MODEL), "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--json"))
    assert [o["n_prompt"] for o in out] == [8, 0] and [o["n_gen"] for o in out] == [0, 4]
    for o in out:
        assert o["n_threads"] == 2 and o["avg_ts"] > 0 and o["stddev_ts"] >= 0
    assert out[1]["effective_gbs"] > 0 and out[1]["machine_read_gbs"] > 0
    assert [o["n_depth"] for o in out] == [0, 0]


def test_bench_depth():
    """-d N: each test after N tokens of context, as llama-bench's -d (JSON n_depth,
    test names 'tg2 @ d150', --phases too); a negative depth is a usage error."""
    out = json.loads(run("bench", "-m", str(MODEL), "-p", "4", "-n", "3", "-d", "200", "-r", "1", "-t", "2",
                         "--json"))
    assert [o["n_depth"] for o in out] == [200, 200] and all(o["avg_ts"] > 0 for o in out)
    txt = run("bench", "-m", str(MODEL), "-p", "0", "-n", "2", "-d", "150", "-r", "1", "-t", "2",
              "--phases").decode()
    assert "tg2 @ d150" in txt and "attn" in txt
    r = subprocess.run([LLMK, "bench", "-d", "-1"], capture_output=True)
    assert r.returncode == 2


def test_bench_phases_and_refusals():
    txt = run("bench", "-m", str(MODEL), "-p", "0", "-n", "4", "-r", "1", "-t", "2", "--phases").decode()
    assert "tg4" in txt and "gate_up" in txt and "lm_head" in txt
    r = subprocess.run([LLMK, "bench", "--path", "nope"], capture_output=True)
    assert r.returncode == 2
    r = subprocess.run([LLMK, "bench", "--kv-type", "q4_0"], capture_output=True)
    assert r.returncode == 2


def test_info_program():
    txt = run("info", "--program", "-m", str(MODEL)).decode()
    lines = txt.splitlines()
    assert lines[0].startswith("program: 244 phases (1 + 30 layers x 8 + 3 final)")
    ops = [ln.split()[1] for ln in lines[1:245]]
    assert ops[:9] == ["embed", "norm_quant", "matmul", "rope_kv", "attn", "matmul", "norm_quant", "matmul", "matmul"]
    assert ops[-3:] == ["norm_quant", "matmul", "argmax"]
    assert "blk.29.ffn_down" in txt and "token_embd.weight[q8_0 49152x576] -> logits" in txt


def test_greedy_text_matches_f32():
    # issue 5: greedy text identical to the f32 path for at least 32 tokens
    prompt = "The three most useful things to know about the ocean are"
    outs = [run("run", "-m", str(MODEL), "--raw", "-p", prompt, "-n", "32", "--temp", "0", "-t", "2", "--path", p)
            for p in ("fast", "f32")]
    assert outs[0] == outs[1] and len(outs[0]) > 40


def test_kv_type_flag(pairs):
    """--kv-type f16 halves the KV cache: close to the f32 cache, not equal to it
    (so the flag really reaches the executor); refused off the fast path and
    for types the cache does not support."""
    ids, _, fast = pairs[1]
    raw = run("logits", "-m", str(MODEL), "--ids", ",".join(map(str, ids)), "--path", "fast",
              "--kv-type", "f16", "-t", "2")
    half = np.frombuffer(raw, dtype="<f4").reshape(len(ids), -1).astype(np.float64)
    rel = np.linalg.norm(half - fast, axis=1) / np.linalg.norm(fast, axis=1)
    print(f"f16 KV vs f32 KV: max rel L2 {rel.max():.2e}")
    assert not np.array_equal(half[1:], fast[1:])
    assert rel.max() < 1e-2
    assert (half.argmax(1) == fast.argmax(1)).mean() >= 0.9
    bad = subprocess.run([LLMK, "logits", "-m", str(MODEL), "--ids", "1,2", "--path", "f32", "--kv-type", "f16"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "llmk_unsupported" in bad.stderr
    bad = subprocess.run([LLMK, "run", "-m", str(MODEL), "-p", "x", "--kv-type", "q4_0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--kv-type" in bad.stderr


def test_kv_q8_0(pairs):
    """--kv-type q8_0 (Q8_0 blocks per head row, 34/32 bytes per value) against the
    f32 cache on the same fast path, over the fixture texts: mean KL(f32 kv || q8_0 kv)
    and argmax agreement (measured on SmolLM2, 202 positions: KL 4.8e-4, argmax 98.5%), bitwise
    independent of the thread count; refused off the fast path."""
    agree = total = 0
    kls = []
    for ids, _, fast in pairs:
        q8 = logits(ids, "fast", kv="q8_0")
        assert np.isfinite(q8).all() and not np.array_equal(q8[1:], fast[1:])
        lp, lq = log_softmax(fast), log_softmax(q8)
        kls.extend((np.exp(lp) * (lp - lq)).sum(axis=1))
        agree += int((fast.argmax(axis=1) == q8.argmax(axis=1)).sum())
        total += len(ids)
    kl = np.array(kls)
    print(f"\nq8_0 KV vs f32 KV: {len(pairs)} sequences, {total} positions: argmax agree {agree}/{total} "
          f"({100.0 * agree / total:.2f}%), KL mean {kl.mean():.3g}, max {kl.max():.3g}")
    assert agree >= 0.95 * total
    assert kl.mean() <= 3e-3
    ids = pairs[1][0]
    assert np.array_equal(logits(ids, "fast", threads=1, kv="q8_0"), logits(ids, "fast", threads=2, kv="q8_0"))
    bad = subprocess.run([LLMK, "logits", "-m", str(MODEL), "--ids", "1,2", "--path", "f32", "--kv-type", "q8_0"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "llmk_unsupported" in bad.stderr


def test_kv_q8_0_run_and_bench():
    prompt = "The three most useful things to know about the ocean are"
    out = run("run", "-m", str(MODEL), "--raw", "-p", prompt, "-n", "24", "--temp", "0", "-t", "2", "--kv-type", "q8_0")
    words = out.decode().split()
    assert len(words) >= 10 and "ocean" in out.decode()
    res = json.loads(run("bench", "-m", str(MODEL), "-p", "16", "-n", "8", "-r", "1", "-t", "2", "--kv-type", "q8_0",
                         "--json"))
    assert [o["n_gen"] for o in res] == [0, 8] and all(o["avg_ts"] > 0 for o in res)


@pytest.fixture(scope="module")
def mixed_model(tmp_path_factory):
    """The default model re-quantized to the other types the int16-activation
    kernels take (issue 19): Q4_0 (in Q4_1's repacked layout), Q5_0 and
    IQ4_NL (in Q8_0's), Q5_1 and the 256-element types (in the Q8S record;
    only ffn_down's rows, 1536, are whole 256-blocks here). IQ4_NL only for
    attn_k/attn_v: llmk's IQ4_NL quantizer is slow (~65 s for the whole
    model)."""
    out = tmp_path_factory.mktemp("mixed") / "mixed.gguf"
    types = ["attn_q=q5_0", "attn_k=iq4_nl", "attn_v=iq4_nl", "attn_output=q5_1", "ffn_up=q5_1",
             "blk.1.ffn_down=q4_k", "blk.2.ffn_down=q5_k", "blk.3.ffn_down=q3_k", "blk.4.ffn_down=iq4_xs",
             "blk.5.ffn_down=mxfp4", "blk.6.ffn_down=q2_k", "ffn_down=q6_k"]
    run("quantize", str(MODEL), str(out), "q4_0", "--allow-requantize", *[a for t in types for a in ("--tensor-type", t)])
    return out


def test_fast_matches_f32_other_a16_types(mixed_model):
    """The same acceptance as test_fast_matches_f32 on the other weight types.
    Measured: 202/202, KL ~1e-7; through 8-bit activations (LLMK_ACT=q8, the
    route these types took before) 195-197/202 and KL ~4e-3, which fails."""
    m = str(mixed_model)
    agree = total = 0
    kls = []
    for t in TEXTS:
        ids = json.loads(run("tokenize", "-m", m, "--special", t))[:160]
        ref, fast = [np.frombuffer(run("logits", "-m", m, "--ids", ",".join(map(str, ids)), "--path", p, "-t", "2",
                                       "--kv-type", "f32"), dtype="<f4").reshape(len(ids), -1).astype(np.float64)
                     for p in ("f32", "fast")]
        lp, lq = log_softmax(ref), log_softmax(fast)
        kls.extend((np.exp(lp) * (lp - lq)).sum(axis=1))
        agree += int((ref.argmax(axis=1) == fast.argmax(axis=1)).sum())
        total += len(ids)
    kl = np.array(kls)
    print(f"\nmixed types fast vs f32: argmax agree {agree}/{total}, KL mean {kl.mean():.3g}")
    assert agree >= 0.99 * total
    assert kl.mean() <= 1e-3


def fresh_copy(src, dst):
    """dst written as a download writes it, in 1 MB chunks: the page cache
    then holds it in large folios, and a fault maps a whole folio (up to
    2 MB) on current kernels. That is how CI's clean machine meets the model
    (scripts/fetch_model.sh has just written it), where a file read back
    from disk long ago sits in small folios."""
    with open(src, "rb") as f, open(dst, "wb") as o:
        while chunk := f.read(1 << 20):
            o.write(chunk)
    return dst


@pytest.mark.parametrize("fresh", [False, True], ids=["cached", "just-written"])
def test_repacked_file_pages_leave_the_resident_set(fresh, tmp_path):
    """Issue 19: the file's copy of the weights never becomes this process's
    memory beside the repacked copy (217 MB peak for the 98 MB default model
    when packed through the mapping). The repacked tensors are read with
    pread, the norms are copies, embedding rows are read past the mapping
    and the type probe decodes a zero row: nothing touches the mapping's
    tensor pages after the load. Before those, a just-written file read
    200 MB on CI (the norms read every token mapped the large folios around
    them) where a cached one read 132 MB here. Now ~129 MB, of which the
    mapping holds ~2 MB (the metadata)."""
    model = fresh_copy(MODEL, tmp_path / MODEL.name) if fresh else MODEL
    out = json.loads(run("bench", "-m", str(model), "-p", "16", "-n", "4", "-r", "1", "-t", "2", "--json"))
    peak, mapped = out[0]["peak_rss_bytes"], out[0]["model_file_rss_bytes"]
    size = model.stat().st_size
    print(f"\npeak RSS {peak / 1e6:.1f} MB, the file's mapping {mapped / 1e6:.1f} MB resident, file {size / 1e6:.1f} MB")
    assert 0 < mapped < 0.05 * size
    assert 0 < peak < 1.6 * size