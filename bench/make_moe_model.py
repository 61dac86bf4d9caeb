#!/usr/bin/env python3
"""A qwen3moe-shaped GGUF of realistic width with random weights, for speed
runs (bench/compare.sh -m FILE, llmk bench -m FILE). Not a test fixture.

Default shape (~0.55B parameters, ~0.1B active per token): hidden 1024,
12 layers, 16/4 heads of 128, 48 experts, top-8, expert ffn 256. The
tokenizer (and so the vocabulary, 488 tokens) is copied from the tiny qwen3moe
fixture, so both llmk and llama.cpp load the file; the embedding is then
small and nearly all weights are in the experts, as in the real models.

    .venv/bin/python bench/make_moe_model.py OUT.gguf [--type f16|q8_0]

f16 is what llama-quantize wants as its input (Q8_0, Q4_K_M, ...); q8_0 is
written directly with gguf-py's quantizer.
"""
import argparse
import os

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "tests", "fixtures", "model", "tiny", "tiny_qwen3moe.gguf")


def bench_writer(out, arch, tokenizer_src, wtype, name, n_vocab=None):
    """A GGUF writer for a random-weight bench model: the tokenizer keys of
    tokenizer_src (padded with filler tokens to n_vocab when given), and
    mat(name, *shape) / vec(name, n) writing random matrices (f16 or q8_0)
    and norm vectors. Returns (writer, vocabulary size, mat, vec)."""
    src = gguf.GGUFReader(tokenizer_src)
    w = gguf.GGUFWriter(out, arch)
    fill = 0
    for key, field in src.fields.items():  # the tokenizer only
        if not key.startswith("tokenizer."):
            continue
        vt = field.types[0]
        if vt != gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, field.contents(), vt)
            continue
        vals = field.contents()
        if n_vocab and key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            fill = n_vocab - len(vals)
            pad = {"tokenizer.ggml.tokens": [f"\u2581f{i}" for i in range(fill)],
                   "tokenizer.ggml.scores": [-1e4 - i for i in range(fill)],
                   "tokenizer.ggml.token_type": [1] * fill}[key]
            vals = list(vals) + pad
        w.add_key_value(key, vals, vt, sub_type=field.types[-1])
    V = n_vocab or int([t for t in src.tensors if t.name == "token_embd.weight"][0].shape[1])
    w.add_name(name)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if wtype == "f16" else gguf.LlamaFileType.MOSTLY_Q8_0)
    rng = np.random.default_rng(1)

    def mat(tname, *shape):
        x = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(shape[-1])).astype(np.float32)
        if wtype == "f16":
            w.add_tensor(tname, x.astype(np.float16))
        else:
            w.add_tensor(tname, gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    def vec(tname, n):
        w.add_tensor(tname, (1 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    return w, V, mat, vec


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--experts", type=int, default=48)
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--ffn-exp", type=int, default=256)
    a = ap.parse_args()
    H, L, X, K, FE, HEADS, KV, HD = a.hidden, a.layers, a.experts, a.top_k, a.ffn_exp, 16, 4, 128
    w, V, mat, vec = bench_writer(a.out, "qwen3moe", TINY, a.type, "moe-bench")
    w.add_block_count(L)
    w.add_context_length(4096)
    w.add_embedding_length(H)
    w.add_feed_forward_length(3 * H)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(X)
    w.add_expert_used_count(K)
    w.add_expert_feed_forward_length(FE)
    rng = np.random.default_rng(1)

    mat("token_embd.weight", V, H)
    vec("output_norm.weight", H)
    mat("output.weight", V, H)
    for i in range(L):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", H)
        mat(p + "attn_q.weight", HEADS * HD, H)
        mat(p + "attn_k.weight", KV * HD, H)
        mat(p + "attn_v.weight", KV * HD, H)
        mat(p + "attn_output.weight", H, HEADS * HD)
        vec(p + "attn_q_norm.weight", HD)
        vec(p + "attn_k_norm.weight", HD)
        vec(p + "ffn_norm.weight", H)
        w.add_tensor(p + "ffn_gate_inp.weight", (rng.standard_normal((X, H)) / np.sqrt(H)).astype(np.float32))
        mat(p + "ffn_gate_exps.weight", X, FE, H)
        mat(p + "ffn_up_exps.weight", X, FE, H)
        mat(p + "ffn_down_exps.weight", X, H, FE)
    finish(w)


if __name__ == "__main__":
    main()
