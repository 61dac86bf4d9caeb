"""Tiny random-weight qwen2 / qwen3 / llama3 checkpoints, written as GGUF.

Each model is built in transformers with a fixed torch seed, its weights are
re-drawn at a scale that gives well-spread logits (the default init of 0.02
makes every logit nearly equal, and greedy decoding then depends on noise),
then written with gguf-py under llama.cpp's tensor names and metadata keys.
The same model in fp32 eager mode gives the reference logits and greedy
continuations. A round trip through transformers' own GGUF loader checks the
writer (names, shapes, the llama Q/K permutation); see check_roundtrip.

The tokenizer is byte-level BPE (tokenizer.ggml.model "gpt2"): a `tokenizers`
BPE trained here on a fixed text behind the published pre-tokenizer regex of
the model family ("qwen2" or "llama-bpe"), so ids of the reference texts come
from `tokenizers` itself, not from anything in llmk.
"""
import json
import os

import numpy as np

# Published pre-tokenizer split patterns (facts from the model families'
# tokenizer.json files). They differ only in how digits group.
QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

TRAIN_TEXT = """\
The quick brown fox jumps over the lazy dog. It's 2024 and they'll say we've won 12345 times.
def main(argv):
    for i in range(10):
        print("hello, world", i * 2)
    return 0

Le café est très bon; où est la bibliothèque? Straße, größer, Übung.
Привет, как дела? 你好，世界。 こんにちは 🙂🚀 emoji 🍕!
Numbers: 3.14159 2.71828 1000000 42 7 0x1F; tabs\tand  double  spaces\n\n\nnew lines.
"""

TOKENIZE_TEXTS = [
    "The quick brown fox",
    "def f(x):\n    return x * 2  # done",
    "Numbers 1234567 and 3.14",
    "café Привет 你好 🙂",
    "  spaces   and\n\n\ttabs \n",
    "they'll say it's OK",
    "<|im_start|>user\nhi<|im_end|>",
]

N_GREEDY = 16


def byte_level_tokenizer(pattern, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tk.train_from_iterator([TRAIN_TEXT] * 4, trainer=trainer)
    return tk


def tokenizer_tables(tk):
    d = json.loads(tk.to_str())
    vocab = d["model"]["vocab"]
    n = len(vocab)
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    assert all(t is not None for t in tokens)
    merges = [m if isinstance(m, str) else " ".join(m) for m in d["model"]["merges"]]
    special = {a["content"]: a["id"] for a in d["added_tokens"]}
    types = [3 if t in special else 1 for t in tokens]  # 3 = CONTROL, 1 = NORMAL
    return tokens, types, merges, special


# ---------------------------------------------------------------- models ----

def spec(arch):
    """Hyperparameters of each tiny model."""
    base = dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, ffn=128,
                ctx=256, theta=10000.0, eps=1e-6)
    if arch == "qwen2":
        return dict(base, pre="qwen2", pattern=QWEN2_PAT, tied=False)
    if arch == "qwen3":
        # head_dim * heads != hidden, as in the real Qwen3 models.
        return dict(base, pre="qwen2", pattern=QWEN2_PAT, head_dim=32, theta=1000000.0, tied=False)
    if arch == "llama3":
        return dict(base, pre="llama-bpe", pattern=LLAMA3_PAT, theta=10000.0, eps=1e-5, tied=False,
                    ctx=512, rope=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                       high_freq_factor=4.0, original_max_position_embeddings=64))
    raise ValueError(arch)


def build_model(arch, s, vocab, seed):
    import torch
    import transformers as tf

    common = dict(vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=s["ffn"],
                  num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                  num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
                  max_position_embeddings=s["ctx"], rms_norm_eps=s["eps"],
                  tie_word_embeddings=s["tied"], hidden_act="silu")
    if arch == "qwen2":
        cfg = tf.Qwen2Config(rope_parameters=dict(rope_type="default", rope_theta=s["theta"]), **common)
        cls = tf.Qwen2ForCausalLM
    elif arch == "qwen3":
        cfg = tf.Qwen3Config(rope_parameters=dict(rope_type="default", rope_theta=s["theta"]),
                             attention_bias=False, **common)
        cls = tf.Qwen3ForCausalLM
    else:
        cfg = tf.LlamaConfig(rope_parameters=dict(s["rope"], rope_theta=s["theta"]),
                             attention_bias=False, mlp_bias=False, **common)
        cls = tf.LlamaForCausalLM
    torch.manual_seed(seed)
    model = cls(cfg).float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                # Non-trivial norm weights (q_norm/k_norm included): not all ones.
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[1]
                scale = 2.0 if name == "lm_head.weight" else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / np.sqrt(fan_in))
    assert arch != "qwen2" or model.model.layers[0].self_attn.q_proj.bias is not None
    return model


def llama_permute(w, n_head):
    """HF -> GGUF layout of a llama attn_q/attn_k weight: within each head,
    rows (first half, second half) become interleaved pairs. This is the
    inverse of transformers' LlamaTensorProcessor._reverse_permute_weights,
    which reshapes GGUF rows to (n_head, dim, 2) and swaps the last two."""
    out_dim = w.shape[0]
    half = out_dim // n_head // 2
    return w.reshape(n_head, 2, half, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(s):
    """Per-frequency divisors llama.cpp's converter stores as rope_freqs.weight
    for rope_type llama3: 1 for short wavelengths, `factor` for long ones, a
    smooth blend in between (by the published Llama 3.1 formula)."""
    r = s["rope"]
    d = s["head_dim"]
    inv = s["theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    wavelen = 2 * np.pi / inv
    orig = r["original_max_position_embeddings"]
    lo_wl = orig / r["low_freq_factor"]
    hi_wl = orig / r["high_freq_factor"]
    out = []
    for wl in wavelen:
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(r["factor"])
        else:
            smooth = (orig / wl - r["low_freq_factor"]) / (r["high_freq_factor"] - r["low_freq_factor"])
            out.append(1.0 / ((1 - smooth) / r["factor"] + smooth))
    return np.array(out, dtype=np.float32)


def gguf_tensors(arch, model, s):
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    t = {"token_embd.weight": sd["model.embed_tokens.weight"],
         "output_norm.weight": sd["model.norm.weight"]}
    if not s["tied"]:
        t["output.weight"] = sd["lm_head.weight"]
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        q = sd[p + "self_attn.q_proj.weight"]
        k = sd[p + "self_attn.k_proj.weight"]
        if arch == "llama3":
            q = llama_permute(q, s["heads"])
            k = llama_permute(k, s["kv_heads"])
        t[b + "attn_norm.weight"] = sd[p + "input_layernorm.weight"]
        t[b + "attn_q.weight"] = q
        t[b + "attn_k.weight"] = k
        t[b + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
        t[b + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
        if arch == "qwen2":
            for n in ("q", "k", "v"):
                t[b + f"attn_{n}.bias"] = sd[p + f"self_attn.{n}_proj.bias"]
        if arch == "qwen3":
            t[b + "attn_q_norm.weight"] = sd[p + "self_attn.q_norm.weight"]
            t[b + "attn_k_norm.weight"] = sd[p + "self_attn.k_norm.weight"]
        t[b + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
        t[b + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
        t[b + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
        t[b + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in t.items()}


def write_gguf(path, arch, s, tensors, tok, rope_mode=None):
    """rope_mode for llama3: "freqs" = rope_freqs.weight tensor (what llama.cpp's
    converter writes for Llama 3.1+), "keys" = llama.rope.scaling.* metadata."""
    import gguf

    tokens, types, merges, special = tok
    garch = "llama" if arch == "llama3" else arch
    w = gguf.GGUFWriter(path, garch)
    w.add_name(f"tiny-{arch}")
    w.add_block_count(s["layers"])
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(s["theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type(0)  # all F32
    if arch == "llama3":
        w.add_rope_dimension_count(s["head_dim"])
        w.add_vocab_size(len(tokens))
        if rope_mode == "keys":
            r = s["rope"]
            w.add_string("llama.rope.scaling.type", "llama3")  # not in gguf-py's RopeScalingType
            w.add_rope_scaling_factor(r["factor"])
            w.add_rope_scaling_orig_ctx_len(r["original_max_position_embeddings"])
            # No gguf-py constant exists for these two; llmk reads them under
            # the same prefix (defaults 1 and 4, as Llama 3.1 uses).
            w.add_float32("llama.rope.scaling.low_freq_factor", r["low_freq_factor"])
            w.add_float32("llama.rope.scaling.high_freq_factor", r["high_freq_factor"])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(s["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(special["<|endoftext|>"])
    w.add_eos_token_id(special["<|im_end|>"])
    w.add_add_bos_token(False)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    if arch == "llama3" and rope_mode == "freqs":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(s))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def check_roundtrip(path, model, arch):
    """Load the written GGUF with transformers' GGUF loader and compare every
    weight with the model it came from: catches wrong names, transposes and a
    wrong Q/K permutation. (transformers' loader does not read rope scaling for
    llama, so the comparison is of weights, not logits.)"""
    import torch
    from transformers import AutoModelForCausalLM

    d, f = os.path.split(path)
    note = ""
    try:
        back = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32)
    except Exception:
        # transformers' GGUF config mapping ignores attention.key_length (qwen3's
        # head_dim != hidden/heads): give it the config, still load the tensors.
        back = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32, config=model.config)
        note = " (config given: transformers' GGUF loader ignores attention.key_length)"
    a = model.state_dict()
    b = back.state_dict()
    bad = [k for k in a if k not in b or a[k].shape != b[k].shape or not torch.equal(a[k].float(), b[k].float())]
    assert not bad, (arch, bad[:5])
    return "all weights equal after transformers' GGUF load" + note


def check_gguf_tokenizer(out_dir, fn, cases):
    """transformers' tokenizer built from the written GGUF must give the same
    ids as the `tokenizers` object: checks vocab, merges, token types and the
    pre-tokenizer name in the file."""
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(out_dir, gguf_file=fn)
    for c in cases:
        ids = t.encode(c["text"], add_special_tokens=False)
        assert ids == c["ids"], (fn, c["text"], ids, c["ids"])
    return True


def run_reference(model, seqs, eos):
    import torch

    out, arrays = [], {}
    for name, ids in seqs:
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0].float().numpy()
            gen = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=N_GREEDY,
                                 do_sample=False, num_beams=1, repetition_penalty=1.0,
                                 temperature=None, top_p=None, top_k=None,
                                 eos_token_id=eos, pad_token_id=eos)
            cont = gen[0, len(ids):].tolist()
            full = model(torch.tensor([ids + cont])).logits[0].float().numpy()
            m64 = model.double()
            l64 = m64(x).logits[0].numpy()
            model.float()
        rows = full[len(ids) - 1:len(ids) - 1 + len(cont)]
        margins = [float(np.diff(np.sort(r)[-2:])[0]) for r in rows]
        agree = [int(np.argmax(r)) for r in rows] == cont
        rel = max(float(np.linalg.norm(logits[i] - l64[i]) / np.linalg.norm(l64[i])) for i in range(len(ids)))
        arrays[name] = logits.astype("<f4")
        out.append({"name": name, "ids": ids, "continuation": cont,
                    "stopped_at_eos": bool(cont) and cont[-1] == eos,
                    "greedy_min_margin": min(margins) if margins else None,
                    "greedy_matches_teacher_forced_argmax": agree,
                    "fp32_vs_fp64_rel_l2_max": rel})
    return out, arrays


def make(out_root):
    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out_dir = os.path.join(out_root, "tiny")
    os.makedirs(out_dir, exist_ok=True)
    for seed, arch in ((11, "qwen2"), (12, "qwen3"), (13, "llama3")):
        s = spec(arch)
        tk = byte_level_tokenizer(s["pattern"], vocab_size=600)
        tok = tokenizer_tables(tk)
        tokens, _, _, special = tok
        vocab = len(tokens)
        model = build_model(arch, s, vocab, seed)
        tensors = gguf_tensors(arch, model, s)
        files = {}
        if arch == "llama3":
            for mode in ("freqs", "keys"):
                fn = f"tiny_llama3_{mode}.gguf"
                write_gguf(os.path.join(out_dir, fn), arch, s, tensors, tok, rope_mode=mode)
                files[fn] = mode
        else:
            fn = f"tiny_{arch}.gguf"
            write_gguf(os.path.join(out_dir, fn), arch, s, tensors, tok)
            files[fn] = None
        roundtrip = {fn: check_roundtrip(os.path.join(out_dir, fn), model, arch) for fn in files}

        # Token ids of a few texts from `tokenizers` (special tokens parsed,
        # as they are added tokens), plus random id sequences.
        tok_cases = []
        for text in TOKENIZE_TEXTS:
            enc = tk.encode(text, add_special_tokens=False)
            assert tk.decode(enc.ids, skip_special_tokens=False) == text, (arch, text)
            tok_cases.append({"text": text, "ids": enc.ids,
                              "special": any(sp in text for sp in SPECIALS)})
        agree = check_gguf_tokenizer(out_dir, next(iter(files)), tok_cases)
        rng = np.random.default_rng(seed)
        seqs = [("text0", tok_cases[0]["ids"]), ("text1", tok_cases[1]["ids"][:12]),
                ("rand0", rng.integers(0, vocab, 9).tolist()),
                ("rand1", rng.integers(0, vocab, 14).tolist())]
        records, arrays = run_reference(model, seqs, special["<|im_end|>"])
        np.savez_compressed(os.path.join(out_dir, f"tiny_{arch}_logits.npz"), **arrays)
        doc = {
            "arch": arch,
            "gguf_files": files,
            "hparams": {k: v for k, v in s.items() if k != "pattern"},
            "n_vocab": vocab,
            "seed": seed,
            "bos_token_id": special["<|endoftext|>"],
            "eos_token_id": special["<|im_end|>"],
            "add_bos": False,
            "roundtrip": roundtrip,
            "transformers_gguf_tokenizer_agrees": agree,
            "n_greedy": N_GREEDY,
            "tokenize": tok_cases,
            "sequences": records,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__, "numpy": np.__version__},
        }
        if arch == "llama3":
            doc["rope_freqs"] = llama3_rope_factors(s).tolist()
        with open(os.path.join(out_dir, f"tiny_{arch}.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"{arch}: vocab {vocab}, files {list(files)}, roundtrip {roundtrip}", flush=True)
        for r in records:
            print(f"  {r['name']}: {len(r['ids'])} ids, margin {r['greedy_min_margin']:.4f}, "
                  f"fp32-vs-fp64 {r['fp32_vs_fp64_rel_l2_max']:.2e}, agree {r['greedy_matches_teacher_forced_argmax']}",
                  flush=True)
