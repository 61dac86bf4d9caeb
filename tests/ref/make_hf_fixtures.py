"""Tiny Hugging Face model folders (tests/fixtures/hf/), their GGUF conversion
by llama.cpp's convert_hf_to_gguf.py, and transformers' reference logits.

    /tmp/refvenv/bin/python tests/ref/make_hf_fixtures.py --convert DIR [--only NAME]

DIR is the llama.cpp tree of the llama-cpp-python sdist (its vendor/llama.cpp,
fetched as bench/llamacpp_tools.sh does: `pip download --no-binary :all:
--no-deps llama-cpp-python==0.3.36`); the converter runs as a tool, nothing of
it is copied here. The venv is the one docs/testing.md describes (torch,
transformers, tokenizers, safetensors, numpy).

Folders (transformers' own classes, save_pretrained; weights redrawn at unit
scale as in model_tiny.py so logits are well spread):
  llama_f32_sharded  LlamaForCausalLM, F32, split into two safetensors files
                     with model.safetensors.index.json, untied lm_head
  qwen2_bf16         Qwen2ForCausalLM, BF16 (QKV biases), tied embeddings
  qwen3_f16          Qwen3ForCausalLM, F16, head_dim 32 != hidden/heads
  gemma3_bf16        Gemma3ForCausalLM, BF16: model_gemma3.py's model and
                     SentencePiece tokenizer (imported, not redefined), made
                     smaller (hidden 32, head_dim 16, ffn 64; still six layers,
                     so five sliding and one global) and with a final logit
                     soft-cap of 30 so that key is exercised
Each has tokenizer.json (a byte-level BPE trained with `tokenizers` behind the
family's split regex, from model_tiny.py), tokenizer_config.json and
generation_config.json (gemma3: tokenizer.json, tokenizer.model for the
converter's sentencepiece branch, Gemma 3's tokenizer_config.json and chat
template as model_gemma3.save_hf writes them), and beside it NAME.gguf converted with --outtype equal
to the folder's dtype (so the matrices are the same bits).

The converter names the pre-tokenizer by hashing how the tokenizer splits a
fixed text; a tokenizer trained here has no known hash, so the run patches
that one lookup to return the family's name (qwen2 / llama-bpe), which is
what the hash would say for the family's real tokenizer.

qwen3moe_f32/ is made without torch: the tiny Qwen3MoeForCausalLM that
tests/ref/make_fixtures.py built with transformers and converted
(tests/fixtures/model/tiny/tiny_qwen3moe.gguf, F32) written back as the HF
folder it came from: the converter's names inverted (facts of its tensor
map), each layer's expert stacks split into mlp.experts.E.*_proj matrices,
safetensors written as the format is specified (an 8-byte header length, the
JSON header, the data), the tiny qwen3 folder's tokenizer files (the same
vocabulary and merges, checked). qwen3moe_f32.gguf and its logits are links
to that fixture and transformers' logits for it.

smollm2_tok/: SmolLM2's tokenizer.json rebuilt from the default GGUF (the HF
hub is not reachable here): vocabulary, merges, Digits + ByteLevel
pre-tokenizer, the special tokens; with a config.json and no weights. The
tokenizer test compares `llmk tokenize -m smollm2_tok/` with the ids in
tests/fixtures/tokenizer/smollm2.json, which the real HF tokenizer produced.

hf.json records per model: the token ids of a few texts (tokenizers'; for
gemma3 transformers' GemmaTokenizer ids of the whole tokenizer corpus,
model_gemma3.tokenizer_cases), id sequences, and in NAME_logits.npz transformers' fp32 logits (eager, the
bf16/f16 weights upcast) at every position.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_tiny as mt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "fixtures", "hf")
TEXTS = ["The quick brown fox", "Numbers 1234567 and 3.14", "café Привет 你好 🙂"]


def build(kind):
    import torch
    import transformers as tf

    torch.manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3}[kind])
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, bos_token_id=0, eos_token_id=2)
    if kind == "llama":
        cfg = tf.LlamaConfig(vocab_size=504, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                             **common)
        model = tf.LlamaForCausalLM(cfg)
    elif kind == "qwen2":
        cfg = tf.Qwen2Config(vocab_size=488, rms_norm_eps=1e-6, rope_theta=1e6, tie_word_embeddings=True, **common)
        model = tf.Qwen2ForCausalLM(cfg)
    else:
        cfg = tf.Qwen3Config(vocab_size=488, rms_norm_eps=1e-6, rope_theta=1e6, head_dim=32,
                             tie_word_embeddings=False, **common)
        model = tf.Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.2 * torch.randn_like(p) if "norm" in name else 0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / np.sqrt(p.shape[1]))
    return model.eval()


def write_folder(kind, name, dtype, shard):
    import torch
    import transformers as tf

    model = build(kind)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    tdt = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    model.to(tdt).save_pretrained(d, max_shard_size="300KB" if shard else "100MB", safe_serialization=True)
    pat = mt.LLAMA3_PAT if kind == "llama" else mt.QWEN2_PAT
    tk = mt.byte_level_tokenizer(pat, 504 if kind == "llama" else 488)
    tk.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "add_bos_token": False,
                   "chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                                    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                                    "{% endif %}",
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f, indent=1)
    # The reference is the saved folder loaded back in fp32 (bf16/f16 weights
    # upcast exactly). Not the model above cast back: .to(bf16) also rounds
    # the rotary inv_freq buffer, which a fresh load recomputes in fp32.
    ref = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    return ref.eval(), tk


def convert(llama_dir, name, kind, dtype):
    pre = {"llama": "llama-bpe", "gptoss": "gpt-4o"}.get(kind, "qwen2")
    code = ("import sys, runpy; sys.path.insert(0, %r); sys.path.insert(1, %r);"
            "import conversion.base as b; b.TextModel.get_vocab_base_pre = lambda self, tok: %r;"
            "sys.argv = ['convert', %r, '--outtype', %r, '--outfile', %r];"
            "runpy.run_path(%r, run_name='__main__')") % (
        llama_dir, os.path.join(llama_dir, "gguf-py"), pre, os.path.join(OUT, name), dtype,
        os.path.join(OUT, name + ".gguf"), os.path.join(llama_dir, "convert_hf_to_gguf.py"))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=llama_dir,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def reference(model, tk, kind, name):
    import torch

    rng = np.random.default_rng({"llama": 11, "qwen2": 12, "qwen3": 13, "gptoss": 14}[kind])
    seqs = {"text0": tk.encode(TEXTS[0]).ids, "text1": tk.encode(TEXTS[2]).ids,
            "rand0": rng.integers(0, model.config.vocab_size, 9).tolist()}
    logits = {}
    with torch.no_grad():
        for k, ids in seqs.items():
            logits[k] = model(torch.tensor([ids])).logits[0].float().numpy()
    np.savez_compressed(os.path.join(OUT, name + "_logits.npz"), **logits)
    return {"sequences": seqs, "tokenize": [{"text": t, "ids": tk.encode(t).ids} for t in TEXTS]}


def write_gemma3(llama_dir, name="gemma3_bf16"):
    """model_gemma3's model and tokenizer as a BF16 folder, its conversion and
    transformers' logits (the folder loaded back in fp32)."""
    import tempfile

    import sentencepiece
    import torch
    import transformers as tf

    import model_gemma3 as g3

    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    s = dict(g3.spec(), hidden=32, head_dim=16, query_pre_attn_scalar=16, ffn=64, final_logit_softcapping=30.0)
    with tempfile.TemporaryDirectory() as tmp:
        spm_path = g3.train_spm(tmp)
        sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
        model = g3.build_model(s, sp.get_piece_size(), g3.SEED + 100).to(torch.bfloat16)
        tok = g3.save_hf(model, spm_path, d)
    convert(llama_dir, name, "gemma3", "bf16")
    ref = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
    rng = np.random.default_rng(14)
    bos = tok.bos_token_id
    seqs = {"text0": tok.encode(g3.SEQ_TEXT), "chat": tok.encode(g3.CHAT_TEXT),
            "rand0": [bos] + rng.integers(4, len(tok), 20).tolist()}
    logits = {}
    with torch.no_grad():
        for k, ids in seqs.items():
            logits[k] = ref(torch.tensor([ids])).logits[0].float().numpy()
    np.savez_compressed(os.path.join(OUT, name + "_logits.npz"), **logits)
    cases = g3.tokenizer_cases(tok, sp)
    return {"arch": "gemma3", "dtype": "bf16", "sequences": seqs,
            "tokenize": [{"text": c["text"], "ids": c["ids_with_bos"]} for c in cases if not c["special"]],
            "tokenize_corpus": [{k: c[k] for k in ("text", "special", "ids")} for c in cases],
            "hparams": s, "n_vocab": len(tok)}


def smollm2_tokenizer(gguf_path):
    """SmolLM2's tokenizer.json rebuilt from the GGUF's tokenizer.ggml.* keys."""
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    r = GGUFReader(gguf_path)

    def arr(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens, merges = arr("tokenizer.ggml.tokens"), arr("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    tk = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                              merges=[tuple(m.split(" ", 1)) for m in merges]))
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t, ty in zip(tokens, types) if ty == 3])
    d = os.path.join(OUT, "smollm2_tok")
    os.makedirs(d, exist_ok=True)
    tk.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": 576, "intermediate_size": 1536,
                   "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                   "max_position_embeddings": 8192, "vocab_size": len(tokens), "rms_norm_eps": 1e-5,
                   "rope_theta": 100000, "tie_word_embeddings": True}, f, indent=1)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": False}, f)


GGUF_TO_HF = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
              "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
              "attn_k_norm": "self_attn.k_norm", "ffn_norm": "post_attention_layernorm", "ffn_gate_inp": "mlp.gate"}


FP4_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def mxfp4_decode(blocks, scales):
    """A checkpoint's MXFP4 [..., rows, n/32, 16] blocks and E8M0 scales as
    [..., rows, n] values: byte k of a block holds elements 2k (low nibble)
    and 2k + 1 (high), each an E2M1 code times 2^(scale - 127)."""
    v = np.stack([FP4_VALUES[blocks & 15], FP4_VALUES[blocks >> 4]], axis=-1).reshape(*blocks.shape[:-1], 32)
    v = v * np.exp2(scales.astype(np.float32) - 127)[..., None]
    return v.reshape(*blocks.shape[:-2], -1)


def write_gptoss(llama_dir):
    """model_gptoss's model (the tiny gpt-oss fixture's spec, tokenizer, seed
    and harmony template) as a BF16 folder, and as an MXFP4 one whose experts
    are random blocks and scales in the checkpoint's layout (gate_up_proj
    rows interleaved gate/up; quantization_config mxfp4), whose reference is
    the BF16 model with those experts decoded (E2M1 times a power of two is
    exact in bf16); each converted by convert_hf_to_gguf.py."""
    import torch
    import transformers as tf
    from safetensors.torch import load_file, save_file

    import model_gptoss as go
    s = go.spec()
    tk, special = go.train_tokenizer()
    model = go.build_model(s, tk.get_vocab_size(), go.SEED).to(torch.bfloat16)
    with open(os.path.join(llama_dir, go.TEMPLATE_FILE), encoding="utf-8") as f:
        template = f.read()
    metas = {}
    d = os.path.join(OUT, "gptoss_bf16")
    shutil.rmtree(d, ignore_errors=True)
    go.save_hf(model, tk, special, template, d)
    convert(llama_dir, "gptoss_bf16", "gptoss", "bf16")
    ref = tf.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    metas["gptoss_bf16"] = dict(arch="gpt-oss", dtype="bf16", **reference(ref.eval(), tk, "gptoss", "gptoss_bf16"))

    d2 = os.path.join(OUT, "gptoss_mxfp4")
    shutil.rmtree(d2, ignore_errors=True)
    shutil.copytree(d, d2)
    tensors = load_file(os.path.join(d2, "model.safetensors"))
    rng = np.random.default_rng(go.SEED + 2)
    X, E, F = s["experts"], s["hidden"], s["ffn_exp"]
    decoded = {}
    for il in range(s["layers"]):
        for part, rows, n in (("gate_up_proj", 2 * F, E), ("down_proj", E, F)):
            key = f"model.layers.{il}.mlp.experts.{part}"
            del tensors[key]
            blocks = rng.integers(0, 256, (X, rows, n // 32, 16), dtype=np.uint8)
            scales = rng.integers(121, 127, (X, rows, n // 32), dtype=np.uint8)
            tensors[key + "_blocks"], tensors[key + "_scales"] = torch.from_numpy(blocks), torch.from_numpy(scales)
            decoded[key] = np.swapaxes(mxfp4_decode(blocks, scales), -1, -2)  # the parameter's [X, n, rows]
    save_file(tensors, os.path.join(d2, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d2, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    with open(os.path.join(d2, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    convert(llama_dir, "gptoss_mxfp4", "gptoss", "bf16")
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if name in decoded:
                p.copy_(torch.from_numpy(decoded[name]))
    metas["gptoss_mxfp4"] = dict(arch="gpt-oss", dtype="mxfp4", **reference(ref.eval(), tk, "gptoss", "gptoss_mxfp4"))
    return metas


def write_safetensors(path, tensors):
    """tensors: name -> f32 array, in the safetensors layout."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def write_qwen3moe_from_gguf(name="qwen3moe_f32"):
    import gguf
    tiny = os.path.join(ROOT, "tests", "fixtures", "model", "tiny")
    src = os.path.join(tiny, "tiny_qwen3moe.gguf")
    with open(os.path.join(tiny, "tiny_qwen3moe.json"), encoding="utf-8") as f:
        doc = json.load(f)
    hp = doc["hparams"]
    r = gguf.GGUFReader(src)
    tensors = {}
    for t in r.tensors:
        a = np.array(t.data, dtype=np.float32)
        if t.name in ("token_embd.weight", "output_norm.weight", "output.weight"):
            tensors[{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                     "output.weight": "lm_head.weight"}[t.name]] = a
            continue
        _, il, stem, _ = t.name.split(".")
        if stem.endswith("_exps"):
            for e in range(a.shape[0]):
                tensors[f"model.layers.{il}.mlp.experts.{e}.{stem.split('_')[1]}_proj.weight"] = a[e]
        else:
            tensors[f"model.layers.{il}.{GGUF_TO_HF[stem]}.weight"] = a
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), dict(sorted(tensors.items())))
    q3 = os.path.join(OUT, "qwen3_f16")
    tj = json.load(open(os.path.join(q3, "tokenizer.json"), encoding="utf-8"))
    toks = [bytes(r.fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in r.fields["tokenizer.ggml.tokens"].data]
    vocab = {i: t for t, i in tj["model"]["vocab"].items()} | {a["id"]: a["content"] for a in tj["added_tokens"]}
    assert [vocab[i] for i in range(len(toks))] == toks, "the qwen3 folder's vocabulary is not this model's"
    for f in ("tokenizer.json", "generation_config.json"):
        shutil.copy(os.path.join(q3, f), os.path.join(d, f))
    with open(os.path.join(q3, "tokenizer_config.json"), encoding="utf-8") as f:
        tc = json.load(f)
    tc.pop("chat_template", None)  # the GGUF fixture has none
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, indent=2)
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": hp["hidden"],
           "num_hidden_layers": hp["layers"], "num_attention_heads": hp["heads"],
           "num_key_value_heads": hp["kv_heads"], "head_dim": hp["head_dim"], "intermediate_size": hp["ffn"],
           "max_position_embeddings": hp["ctx"], "rms_norm_eps": hp["eps"], "rope_theta": hp["theta"],
           "vocab_size": doc["n_vocab"], "num_experts": hp["experts"], "num_experts_per_tok": hp["top_k"],
           "moe_intermediate_size": hp["ffn_exp"], "norm_topk_prob": True, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False,
           "use_sliding_window": False, "bos_token_id": doc["bos_token_id"], "eos_token_id": doc["eos_token_id"],
           "dtype": "float32"}
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    for link, target in ((name + ".gguf", "tiny_qwen3moe.gguf"), (name + "_logits.npz", "tiny_qwen3moe_logits.npz")):
        p = os.path.join(OUT, link)
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(os.path.join("..", "model", "tiny", target), p)
    with open(os.path.join(OUT, "hf.json"), encoding="utf-8") as f:
        tokenize = json.load(f)["models"]["qwen3_f16"]["tokenize"]
    return {"arch": "qwen3moe", "dtype": "f32", "from": "tests/fixtures/model/tiny/tiny_qwen3moe.gguf",
            "sequences": {s["name"]: s["ids"] for s in doc["sequences"]}, "tokenize": tokenize}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--convert", help="llama.cpp tree (vendor/llama.cpp of the sdist); not for --only qwen3moe_f32")
    ap.add_argument("--smollm2", default=os.path.expanduser("~/.cache/llmk/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--only", help="remake just this folder (e.g. gemma3_bf16), keeping the others and their "
                                   "hf.json entries as they are")
    a = ap.parse_args()
    if not a.convert and a.only != "qwen3moe_f32":
        ap.error("--convert is required (but for --only qwen3moe_f32)")
    os.makedirs(OUT, exist_ok=True)
    if a.only:
        with open(os.path.join(OUT, "hf.json"), encoding="utf-8") as f:
            meta = json.load(f)
        if a.only == "qwen3moe_f32":
            meta["models"][a.only] = write_qwen3moe_from_gguf()
        elif a.only == "gptoss":
            meta["models"].update(write_gptoss(a.convert))
        elif a.only == "gemma3_bf16":
            meta["models"][a.only] = write_gemma3(a.convert)
        else:
            kind, dtype = a.only.split("_")[0], a.only.split("_")[1]
            model, tk = write_folder(kind, a.only, dtype, "sharded" in a.only)
            convert(a.convert, a.only, kind, dtype)
            meta["models"][a.only] = dict(arch=kind, dtype=dtype, **reference(model, tk, kind, a.only))
        with open(os.path.join(OUT, "hf.json"), "w") as f:
            json.dump(meta, f, indent=1, ensure_ascii=False)
        return
    import tokenizers
    import torch
    import transformers
    meta = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__}, "models": {}}
    for kind, name, dtype, shard in [("llama", "llama_f32_sharded", "f32", True),
                                     ("qwen2", "qwen2_bf16", "bf16", False),
                                     ("qwen3", "qwen3_f16", "f16", False)]:
        model, tk = write_folder(kind, name, dtype, shard)
        convert(a.convert, name, kind, dtype)
        meta["models"][name] = dict(arch=kind, dtype=dtype, **reference(model, tk, kind, name))
        print(name, "done")
    meta["models"]["gemma3_bf16"] = write_gemma3(a.convert)
    print("gemma3_bf16 done")
    with open(os.path.join(OUT, "hf.json"), "w") as f:  # the qwen3 folder's entry, read by the next
        json.dump(meta, f, indent=1, ensure_ascii=False)
    meta["models"]["qwen3moe_f32"] = write_qwen3moe_from_gguf()
    meta["models"].update(write_gptoss(a.convert))
    smollm2_tokenizer(a.smollm2)
    with open(os.path.join(OUT, "hf.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
