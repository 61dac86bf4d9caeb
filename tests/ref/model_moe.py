"""A tiny random-weight Qwen3-MoE checkpoint, converted to GGUF by llama.cpp's
own converter, and its reference logits from transformers.

The model is transformers' Qwen3MoeForCausalLM (8 experts, top-2 with
renormalised weights, q/k RMSNorm), with weights re-drawn as model_tiny.py
does; the router at a larger scale so the top-2 choice is well separated
(the fixture records the smallest gap between the 2nd and 3rd router logit
over every token and layer the references ran). It is saved as a Hugging Face
folder with a `tokenizers` byte-level BPE (model_tiny.py's), then converted
by `convert_hf_to_gguf.py` from the llama-cpp-python sdist, run as a separate
tool: the sdist is fetched with pip into a temporary folder, nothing of it is
kept. Two files: all-F32 (--outtype f32) and Q8_0 (--outtype q8_0: the
experts are then the quantized 3-D stacks the MoE kernels read).

The converter recognises a BPE pre-tokenizer by hashing its output on a test
text; ours is trained here, so its hash is unknown and the tool is told it
is qwen2's (the regex it was built with) by overriding that one lookup.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import model_tiny as mt

LLAMACPP_VERSION = "0.3.36"
N_EXPERT, TOP_K, FF_EXP = 8, 2, 32


def spec():
    return dict(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=32, ffn=128, ctx=256, theta=1000000.0,
                eps=1e-6, experts=N_EXPERT, top_k=TOP_K, ffn_exp=FF_EXP, pre="qwen2")


def build_model(s, vocab, seed):
    import torch
    import transformers as tf

    cfg = tf.Qwen3MoeConfig(
        vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
        max_position_embeddings=s["ctx"], rms_norm_eps=s["eps"], tie_word_embeddings=False, hidden_act="silu",
        rope_parameters=dict(rope_type="default", rope_theta=s["theta"]), attention_bias=False,
        decoder_sparse_step=1, mlp_only_layers=[], moe_intermediate_size=s["ffn_exp"],
        num_experts=s["experts"], num_experts_per_tok=s["top_k"], norm_topk_prob=True,
        bos_token_id=None, eos_token_id=None)
    # the eager expert loop (the grouped-mm one takes no float64, which the
    # fp32-vs-fp64 check runs)
    cfg._experts_implementation = "eager"
    torch.manual_seed(seed)
    model = tf.Qwen3MoeForCausalLM(cfg).float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1]
                scale = 2.0 if name == "lm_head.weight" else 4.0 if name.endswith("mlp.gate.weight") else 1.0
                p.copy_(scale * torch.randn(p.shape, generator=g) / np.sqrt(fan_in))
    return model


def fetch_converter(tmp):
    """llama.cpp's converter and its gguf-py, from the llama-cpp-python sdist."""
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                    "--no-binary", ":all:", "--no-deps", f"llama-cpp-python=={LLAMACPP_VERSION}", "-d", tmp],
                   check=True)
    import tarfile
    with tarfile.open(os.path.join(tmp, f"llama_cpp_python-{LLAMACPP_VERSION}.tar.gz")) as tf:
        tf.extractall(tmp, filter="data")
    return os.path.join(tmp, f"llama_cpp_python-{LLAMACPP_VERSION}", "vendor", "llama.cpp")


CONVERT = """
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
import convert_hf_to_gguf as c
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
c.main()
"""


def convert(conv_dir, hf_dir, out, outtype):
    subprocess.run([sys.executable, "-c", CONVERT, conv_dir, hf_dir, "--outtype", outtype, "--outfile", out],
                   check=True, stdout=subprocess.DEVNULL)


def save_hf(model, tk, special, d):
    from transformers import PreTrainedTokenizerFast

    model.config.bos_token_id = special["<|endoftext|>"]
    model.config.eos_token_id = special["<|im_end|>"]
    model.save_pretrained(d)
    t = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                pad_token="<|endoftext|>")
    t.save_pretrained(d)


def router_margins(model, seqs):
    """Smallest gap between the k-th and (k+1)-th router logit, per sequence,
    over every layer and position (a tie would make the choice arbitrary)."""
    import torch

    out = {}
    for name, ids in seqs:
        gaps = []
        hooks = []

        def hook(mod, inp, outp):
            logits = outp[0].detach().double()
            srt = torch.sort(logits, dim=-1, descending=True).values
            gaps.append(float((srt[:, TOP_K - 1] - srt[:, TOP_K]).min()))

        for layer in model.model.layers:
            hooks.append(layer.mlp.gate.register_forward_hook(hook))
        with torch.no_grad():
            model(torch.tensor([ids]))
        for h in hooks:
            h.remove()
        out[name] = min(gaps)
    return out


def make(out_root):
    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out_dir = os.path.join(out_root, "tiny")
    os.makedirs(out_dir, exist_ok=True)
    seed, s = 21, spec()
    tk = mt.byte_level_tokenizer(mt.QWEN2_PAT, vocab_size=600)
    tokens, _, _, special = mt.tokenizer_tables(tk)
    vocab = len(tokens)
    model = build_model(s, vocab, seed)
    files = {"tiny_qwen3moe.gguf": "f32", "tiny_qwen3moe_q8_0.gguf": "q8_0"}
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        save_hf(model, tk, special, hf)
        conv = fetch_converter(tmp)
        for fn, outtype in files.items():
            convert(conv, hf, os.path.join(out_dir, fn), outtype)
    rng = np.random.default_rng(seed)
    tok_ids = [tk.encode(t, add_special_tokens=False).ids for t in mt.TOKENIZE_TEXTS[:2]]
    seqs = [("text0", tok_ids[0]), ("text1", tok_ids[1][:12]),
            ("rand0", rng.integers(0, vocab, 9).tolist()), ("rand1", rng.integers(0, vocab, 14).tolist())]
    records, arrays = mt.run_reference(model, seqs, special["<|im_end|>"])
    margins = router_margins(model, [(r["name"], r["ids"] + r["continuation"]) for r in records])
    for r in records:
        r["router_min_gap"] = margins[r["name"]]
    np.savez_compressed(os.path.join(out_dir, "tiny_qwen3moe_logits.npz"), **arrays)
    doc = {
        "arch": "qwen3moe",
        "gguf_files": files,
        "converter": f"convert_hf_to_gguf.py of llama-cpp-python {LLAMACPP_VERSION} (sdist)",
        "hparams": s,
        "n_vocab": vocab,
        "seed": seed,
        "bos_token_id": special["<|endoftext|>"],
        "eos_token_id": special["<|im_end|>"],
        "n_greedy": mt.N_GREEDY,
        "sequences": records,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__},
    }
    with open(os.path.join(out_dir, "tiny_qwen3moe.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"qwen3moe: vocab {vocab}, files {list(files)}", flush=True)
    for r in records:
        print(f"  {r['name']}: {len(r['ids'])} ids, margin {r['greedy_min_margin']:.4f}, router gap "
              f"{r['router_min_gap']:.4f}, fp32-vs-fp64 {r['fp32_vs_fp64_rel_l2_max']:.2e}, "
              f"agree {r['greedy_matches_teacher_forced_argmax']}", flush=True)
