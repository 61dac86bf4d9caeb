"""`-m DIR` with a Hugging Face model folder (tests/fixtures/hf, written by
tests/ref/make_hf_fixtures.py): the same logits as llama.cpp's GGUF
conversion of the same weights (bitwise: the matrices are the same type and
bits), transformers' logits within docs/testing.md's tolerances, the HF
tokenizer's ids, and clear refusals of folders llmk cannot run."""
import json
import os
import shutil
import struct
import subprocess
import tempfile

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures", "hf")
BIN = os.environ.get("LLMK_BIN", os.path.join(ROOT, "build", "llmk"))
with open(os.path.join(FIX, "hf.json"), encoding="utf-8") as fh:
    META = json.load(fh)
MODELS = sorted(META["models"])
# docs/testing.md: f64 reference path <= 1e-5, f32 path <= 1e-4 (relative L2 per position).
TOL = {"ref": 1e-5, "f32": 1e-4}


def run(*args, check=True):
    p = subprocess.run([BIN, *args], capture_output=True, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    return p


def logits(model, ids, path):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.bin")
        run("logits", "-m", model, "--ids", ",".join(map(str, ids)), "--path", path, "--out", out, "-t", "2")
        with open(out, "rb") as fh:
            return fh.read()


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("path", ["ref", "f32", "fast"])
def test_folder_equals_its_gguf_conversion(name, path):
    folder, gguf = os.path.join(FIX, name), os.path.join(FIX, name + ".gguf")
    for ids in META["models"][name]["sequences"].values():
        a, b = logits(folder, ids, path), logits(gguf, ids, path)
        assert a == b, f"{name} {path}: folder and GGUF logits differ"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("path", ["ref", "f32"])
def test_folder_matches_transformers(name, path):
    ref = np.load(os.path.join(FIX, name + "_logits.npz"))
    for key, ids in META["models"][name]["sequences"].items():
        want = ref[key]
        got = np.frombuffer(logits(os.path.join(FIX, name), ids, path), dtype="<f4").reshape(want.shape)
        err = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
        assert err.max() <= TOL[path], f"{name} {key} {path}: rel L2 {err.max():.3g} > {TOL[path]} ({err})"


@pytest.mark.parametrize("name", MODELS)
def test_greedy_run_equals_gguf(name):
    ids = ",".join(map(str, META["models"][name]["sequences"]["text0"]))
    outs = [run("run", "-m", m, "--prompt-ids", ids, "-n", "8", "--temp", "0", "--print-ids", "-t", "2").stdout
            for m in (os.path.join(FIX, name), os.path.join(FIX, name + ".gguf"))]
    assert outs[0] == outs[1]


@pytest.mark.parametrize("name", MODELS)
def test_tokenizer_json_ids(name):
    for c in META["models"][name]["tokenize"]:
        got = json.loads(run("tokenize", "-m", os.path.join(FIX, name), c["text"]).stdout)
        assert got == c["ids"], c["text"]


def test_smollm2_tokenizer_json_on_tokenizer_corpus():
    """The SmolLM2 tokenizer.json (rebuilt from the GGUF) against the ids the
    real HF tokenizer gave for tests/fixtures/tokenizer/smollm2.json."""
    with open(os.path.join(ROOT, "tests", "fixtures", "tokenizer", "smollm2.json"), encoding="utf-8") as fh:
        cases = json.load(fh)["cases"]
    with tempfile.TemporaryDirectory() as d:
        for i, c in enumerate(cases):
            p = os.path.join(d, f"{i}.txt")
            with open(p, "wb") as fh:
                fh.write(c["text"].encode("utf-8"))
            args = ["tokenize", "-m", os.path.join(FIX, "smollm2_tok"), "-f", p] + (["--special"] if c["special"] else [])
            assert json.loads(run(*args).stdout) == c["ids"], repr(c["text"])


def test_folder_metadata_like_gguf():
    """info on the folder and on its conversion agree on what the loader reads."""
    for name in MODELS:
        a = run("info", "-m", os.path.join(FIX, name)).stdout.decode()
        b = run("info", "-m", os.path.join(FIX, name + ".gguf")).stdout.decode()
        pick = lambda s: [l for l in s.splitlines() if l.startswith(("architecture", "tokenizer", "chat template"))]
        assert pick(a) == pick(b)


def test_bf16_folder_keeps_bf16():
    """The BF16 folder's tensors stay BF16 in the view (no widening to f32)."""
    info = run("info", "-m", os.path.join(FIX, "qwen2_bf16")).stdout.decode()
    kinds = [l.split()[0] for l in info.splitlines()[info.splitlines().index(
        next(l for l in info.splitlines() if l.startswith("tensors:"))) + 1:] if l.startswith("  ")]
    assert kinds == ["bf16"], info


def test_chat_takes_a_folder():
    p = subprocess.run([BIN, "chat", "-m", os.path.join(FIX, "qwen2_bf16"), "-n", "4", "--seed", "1"],
                       input=b"hi\n", capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode("utf-8", "replace")


def refused(folder, *words):
    p = run("logits", "-m", folder, "--ids", "1,2", "--out", os.devnull, check=False)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode != 0 and all(w in err for w in words), err
    assert "Sanitizer" not in err and p.returncode < 128, err


def copy(tmp, name="qwen2_bf16"):
    d = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIX, name), d)
    return d


def test_refusals():
    with tempfile.TemporaryDirectory() as tmp:
        d = copy(tmp)
        os.unlink(os.path.join(d, "config.json"))
        refused(d, "config.json")

        d = copy(tmp, "qwen3_f16")
        cfg = json.load(open(os.path.join(d, "config.json")))
        cfg["architectures"] = ["MistralForCausalLM"]
        json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        refused(d, "MistralForCausalLM", "not supported")

        d = copy(tmp, "llama_f32_sharded")
        shard = os.path.join(d, "model-00002-of-00002.safetensors")
        with open(shard, "rb") as fh:
            data = fh.read()
        with open(shard, "wb") as fh:
            fh.write(data[:-100])
        refused(d, "model-00002-of-00002.safetensors", "truncated")

        # An I32 tensor: the header rewritten, the data section unchanged in size.
        d = os.path.join(tmp, "dtype")
        shutil.copytree(os.path.join(FIX, "qwen2_bf16"), d)
        st = os.path.join(d, "model.safetensors")
        with open(st, "rb") as fh:
            raw = fh.read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        name = next(k for k in hdr if k != "__metadata__" and len(hdr[k]["shape"]) == 2)
        hdr[name]["dtype"] = "I16"  # same element size as BF16
        h = json.dumps(hdr).encode()
        with open(st, "wb") as fh:
            fh.write(struct.pack("<Q", len(h)) + h + raw[8 + n:])
        refused(d, "I16", "not supported")


@pytest.mark.parametrize("name", MODELS)
def test_info_describes_a_folder_as_a_folder(name):
    """`llmk info -m DIR` names the folder format (it once said "GGUF v3") and
    counts the tensor bytes, which equal the sum over the safetensors headers'
    data_offsets (the GGUF conversion differs: it stores norms as f32)."""
    folder = os.path.join(FIX, name)
    out = run("info", "-m", folder).stdout.decode()
    fmt = next(line for line in out.splitlines() if line.startswith("format:"))
    assert "Hugging Face folder" in fmt and "GGUF" not in fmt
    want = 0
    gemma = META["models"][name]["arch"] == "gemma3"
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
            for k, v in header.items():
                if k == "__metadata__":
                    continue
                # gemma3's norms are held as f32 copies of 1 + w (the converter's shift)
                shifted = gemma and k.endswith("norm.weight")
                want += 4 * v["shape"][0] if shifted else v["data_offsets"][1] - v["data_offsets"][0]
    assert f" {want} bytes of tensors" in fmt


# ---- gemma3 -------------------------------------------------------------------

G3 = os.path.join(FIX, "gemma3_bf16")


def tokenize(model, text, special, bos):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.txt")
        with open(p, "wb") as fh:
            fh.write(text.encode("utf-8"))
        args = ["tokenize", "-m", model, "-f", p] + (["--special"] if special else []) + ([] if bos else ["--no-bos"])
        return json.loads(run(*args).stdout)


def test_gemma3_tokenizer_on_tokenizer_corpus():
    """The folder's tokenizer.json, read as the SentencePiece model the
    converter builds from tokenizer.model, gives the GGUF conversion's ids
    and transformers' GemmaTokenizer ids on the whole tokenizer corpus (and
    the Gemma turn texts), with special tokens parsed or not; BOS added as
    the GGUF says."""
    cases = META["models"]["gemma3_bf16"]["tokenize_corpus"]
    assert len(cases) > 30
    for c in cases:
        got = tokenize(G3, c["text"], c["special"], False)
        assert got == tokenize(G3 + ".gguf", c["text"], c["special"], False), repr(c["text"])
        assert got == c["ids"], repr(c["text"])
    c = cases[0]
    assert tokenize(G3, c["text"], False, True) == [2] + c["ids"]


def metadata(model):
    return json.loads(run("info", "--json", "-m", model).stdout)["metadata"]


def test_gemma3_metadata_equals_conversion():
    """Every metadata value the conversion has (the token scores and types
    included) the folder's view has too, bit for bit, except the converter's
    general.* labels and add_sep_token, which llmk does not read."""
    a, b = metadata(G3), metadata(G3 + ".gguf")
    skip = lambda k: k.startswith("general.") and k != "general.architecture" or k == "tokenizer.ggml.add_sep_token"
    assert {k: v for k, v in a.items() if not skip(k)} == {k: v for k, v in b.items() if not skip(k)}
    for k in ("gemma3.attention.sliding_window", "gemma3.rope.freq_base_swa", "gemma3.final_logit_softcapping",
              "tokenizer.ggml.scores", "tokenizer.ggml.add_space_prefix"):
        assert k in a, k


def test_gemma3_folder_keeps_bf16_matrices():
    """Matrices stay BF16 (the mapping's bytes); only the 1-D norms become
    f32 (1 + w, as the converter stores them)."""
    tensors = json.loads(run("info", "--json", "-m", G3).stdout)["tensors"]
    for t in tensors:
        want = "f32" if t["name"].endswith("norm.weight") else "bf16"
        assert t["type"].lower() == want, t


def g3_copy(tmp, edit):
    d = os.path.join(tmp, "g3_%d" % len(os.listdir(tmp)))
    shutil.copytree(G3, d)
    with open(os.path.join(d, "config.json"), encoding="utf-8") as fh:
        cfg = json.load(fh)
    edit(cfg)
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    return d


def test_gemma3_older_config_keys():
    """A transformers 4 config (rope_theta, rope_scaling, rope_local_base_freq,
    sliding_window_pattern; no layer_types or rope_parameters) is the same
    model: the same logits as the conversion."""
    def old(cfg):
        rp = cfg.pop("rope_parameters")
        cfg.pop("layer_types")
        cfg.pop("_sliding_window_pattern", None)
        cfg["rope_theta"] = rp["full_attention"]["rope_theta"]
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": rp["full_attention"]["factor"]}
        cfg["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        cfg["sliding_window_pattern"] = 6
        cfg["hidden_act"] = cfg.pop("hidden_activation")
    ids = META["models"]["gemma3_bf16"]["sequences"]["text0"]
    with tempfile.TemporaryDirectory() as tmp:
        d = g3_copy(tmp, old)
        assert logits(d, ids, "f32") == logits(G3 + ".gguf", ids, "f32")
        # and the keys do matter: a different local base changes the logits
        d = g3_copy(tmp, lambda c: (old(c), c.update(rope_local_base_freq=20000.0)))
        assert logits(d, ids, "f32") != logits(G3 + ".gguf", ids, "f32")


def test_gemma3_refusals():
    def setk(**kw):
        return lambda c: c.update(kw)
    lt = ["sliding_attention"] * 6
    cases = [
        (setk(architectures=["Gemma3ForConditionalGeneration"]), ["Gemma3ForConditionalGeneration", "Gemma3ForCausalLM"]),
        (setk(attn_logit_softcapping=50.0), ["attn_logit_softcapping", "not supported"]),
        (setk(layer_types=lt), ["layer_types[5]", "sliding_attention"]),
        (lambda c: (c.pop("layer_types"), c.update(sliding_window_pattern=4)), ["sliding_window_pattern 4"]),
        (setk(query_pre_attn_scalar=256), ["query_pre_attn_scalar 256", "1/sqrt(16)"]),
        (setk(hidden_activation="gelu"), ["hidden_activation gelu", "gelu_pytorch_tanh"]),
        (lambda c: c["rope_parameters"]["sliding_attention"].update(rope_type="linear", factor=2.0),
         ["sliding layers"]),
        (lambda c: c["rope_parameters"]["full_attention"].update(rope_type="yarn"), ["yarn", "not supported"]),
        (setk(use_bidirectional_attention=True), ["use_bidirectional_attention"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for edit, words in cases:
            refused(g3_copy(tmp, edit), *words)
        # a byte_fallback tokenizer.json whose normalizer is not Gemma's
        d = g3_copy(tmp, lambda c: None)
        p = os.path.join(d, "tokenizer.json")
        with open(p, encoding="utf-8") as fh:
            tj = json.load(fh)
        tj["normalizer"] = {"type": "NFKC"}
        with open(p, "w", encoding="utf-8") as fh:
            json.dump(tj, fh)
        refused(d, "normalizer")


def test_gemma3_embedding_rows_beyond_the_vocabulary_dropped():
    """An embedding with more rows than config's vocab_size (the tokenizer's
    size): the converter drops the extra rows, and so does the view (the
    tied output then has vocab_size logits, the conversion's)."""
    ids = META["models"]["gemma3_bf16"]["sequences"]["chat"]
    with tempfile.TemporaryDirectory() as tmp:
        d = g3_copy(tmp, lambda c: None)
        st = os.path.join(d, "model.safetensors")
        with open(st, "rb") as fh:
            raw = fh.read()
        (n,) = struct.unpack("<Q", raw[:8])
        hdr = json.loads(raw[8:8 + n])
        body = raw[8 + n:]
        out, off = b"", 0
        for k in sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0]):
            b, e = hdr[k]["data_offsets"]
            data = body[b:e]
            if k == "model.embed_tokens.weight":
                rows, cols = hdr[k]["shape"]
                data += b"\x80\x3f" * (10 * cols)  # ten more rows of bf16 1.0
                hdr[k]["shape"] = [rows + 10, cols]
            hdr[k]["data_offsets"] = [off, off + len(data)]
            out += data
            off += len(data)
        h = json.dumps(hdr).encode()
        with open(st, "wb") as fh:
            fh.write(struct.pack("<Q", len(h)) + h + out)
        assert logits(d, ids, "f32") == logits(G3 + ".gguf", ids, "f32")


def st_read(path):
    """A safetensors file as (header dict, data bytes), read as the format is specified."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n)), f.read()


def st_write(path, header, data):
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + data)


def test_qwen3moe_expert_stacks():
    """The folder's per-expert matrices become GGUF's 3-D stacks: the same
    stacked bytes as the conversion (the logits tests above are bitwise),
    whatever order the file lists the experts in."""
    with tempfile.TemporaryDirectory() as tmp:
        d = copy(tmp, "qwen3moe_f32")
        head, data = st_read(os.path.join(d, "model.safetensors"))
        meta = head.pop("__metadata__")
        st_write(os.path.join(d, "model.safetensors"), {"__metadata__": meta, **dict(reversed(list(head.items())))}, data)
        ids = META["models"]["qwen3moe_f32"]["sequences"]["text0"]
        assert logits(d, ids, "ref") == logits(os.path.join(FIX, "qwen3moe_f32.gguf"), ids, "ref")


def test_qwen3moe_refusals():
    with tempfile.TemporaryDirectory() as tmp:
        for edit, words in [({"mlp_only_layers": [0]}, ["dense layers among the MoE"]),
                            ({"decoder_sparse_step": 2}, ["decoder_sparse_step 2"]),
                            ({"num_experts": None}, ["num_experts"]),
                            ({"num_experts_per_tok": 9}, ["num_experts_per_tok"])]:
            d = copy(tmp, "qwen3moe_f32")
            cfg = json.load(open(os.path.join(d, "config.json")))
            cfg.update(edit)
            if edit.get("num_experts", 0) is None:
                del cfg["num_experts"]
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
            refused(d, *words)
            shutil.rmtree(d)
        # an expert missing, one of another shape, one beyond num_experts
        for what, words in [("drop", ["blk.1.ffn_up_exps.weight", "expert 3 is missing"]),
                            ("shape", ["blk.1.ffn_up_exps.weight", "expert 3 is not a matrix"]),
                            ("beyond", ["mlp.experts.8.up_proj.weight", "no counterpart"])]:
            d = copy(tmp, "qwen3moe_f32")
            path = os.path.join(d, "model.safetensors")
            head, data = st_read(path)
            key = "model.layers.1.mlp.experts.3.up_proj.weight"
            if what == "drop":
                del head[key]
            elif what == "shape":
                head[key]["shape"] = list(reversed(head[key]["shape"]))
            else:
                head["model.layers.1.mlp.experts.8.up_proj.weight"] = head.pop(key)
            st_write(path, head, data)
            refused(d, *words)
            shutil.rmtree(d)


def test_gptoss_refusals():
    with tempfile.TemporaryDirectory() as tmp:
        for edit, words in [({"layer_types": ["full_attention", "sliding_attention"] * 2}, ["layer_types[0]"]),
                            ({"swiglu_limit": 8.0}, ["swiglu_limit 8"]),
                            ({"num_local_experts": None}, ["num_local_experts"]),
                            ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                                  "original_max_position_embeddings": 4096, "truncate": True}},
                             ["truncate true"]),
                            ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 150000.0, "factor": 8.0,
                                                  "original_max_position_embeddings": 4096}},
                             ["rope scaling 'llama3'"])]:
            d = copy(tmp, "gptoss_bf16")
            cfg = json.load(open(os.path.join(d, "config.json")))
            cfg.update(edit)
            for k in [k for k, v in edit.items() if v is None]:
                del cfg[k]
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
            refused(d, *words)
            shutil.rmtree(d)
        # a part missing, misshapen, or plain weights beside MXFP4 blocks; U8 outside the blocks
        for name, what, words in [("gptoss_bf16", "drop:model.layers.1.mlp.experts.gate_up_proj_bias",
                                   ["blk.1", "gate_up_proj_bias is missing"]),
                                  ("gptoss_bf16", "shape:model.layers.0.mlp.experts.down_proj",
                                   ["blk.0", "down_proj is missing or not of the shape"]),
                                  ("gptoss_mxfp4", "drop:model.layers.2.mlp.experts.down_proj_scales",
                                   ["blk.2", "down_proj_blocks / _scales"]),
                                  ("gptoss_bf16", "u8:model.layers.0.self_attn.q_proj.weight", ["attn_q"])]:
            d = copy(tmp, name)
            path = os.path.join(d, "model.safetensors")
            head, data = st_read(path)
            op, key = what.split(":")
            if op == "drop":
                del head[key]
            elif op == "shape":
                head[key]["shape"] = list(reversed(head[key]["shape"]))
            else:  # the same bytes as U8: twice the elements
                head[key]["dtype"] = "U8"
                head[key]["shape"][-1] *= 2
            st_write(path, head, data)
            refused(d, *words)
            shutil.rmtree(d)


def test_gptoss_down_proj_of_another_dtype():
    """down_proj in F32 beside a BF16 gate_up_proj (the same values, widened
    exactly): each stack keeps its own type, and the ref path's logits are
    the BF16 folder's bit for bit."""
    with tempfile.TemporaryDirectory() as tmp:
        d = copy(tmp, "gptoss_bf16")
        path = os.path.join(d, "model.safetensors")
        head, data = st_read(path)
        meta = head.pop("__metadata__", None)
        parts, off = {}, 0
        for k, v in head.items():
            raw = data[v["data_offsets"][0]:v["data_offsets"][1]]
            if k.endswith("mlp.experts.down_proj"):
                raw = (np.frombuffer(raw, "<u2").astype("<u4") << 16).tobytes()
                v = dict(v, dtype="F32")
            parts[k] = (v, raw)
        new_head, blobs = ({"__metadata__": meta} if meta else {}), []
        for k, (v, raw) in parts.items():
            new_head[k] = dict(v, data_offsets=[off, off + len(raw)])
            blobs.append(raw)
            off += len(raw)
        st_write(path, new_head, b"".join(blobs))
        ids = META["models"]["gptoss_bf16"]["sequences"]["text0"]
        assert logits(d, ids, "ref") == logits(os.path.join(FIX, "gptoss_bf16"), ids, "ref")


def test_rope_scaling_keys_of_a_llama_folder(tmp_path):
    """config.json's rope_scaling becomes the GGUF keys llama.cpp's converter
    writes: llama3 (factor, original context, low/high frequency factors) and
    linear (factor)."""
    for scaling, want in [
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
          "low_freq_factor": 1.0, "high_freq_factor": 4.0},
         {"type": "llama3", "factor": 8.0, "original_context_length": 8192, "low_freq_factor": 1.0,
          "high_freq_factor": 4.0}),
        ({"type": "linear", "factor": 2.0}, {"type": "linear", "factor": 2.0}),
    ]:
        d = os.path.join(tmp_path, want["type"])
        shutil.copytree(os.path.join(FIX, "llama_f32_sharded"), d)
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        cfg["rope_scaling"] = scaling
        with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f)
        kv = metadata(d)
        got = {k[len("llama.rope.scaling."):]: v["value"] for k, v in kv.items() if k.startswith("llama.rope.scaling.")}
        assert got == want, got
