#!/usr/bin/env python3
"""A gpt-oss-shaped GGUF of realistic width with random weights, for speed
runs (bench/compare.sh -m FILE, llmk bench -m FILE). Not a test fixture.

XX
layout scaled down): hidden 1024, 12 layers alternating sliding (window 128)
and full attention, 16 query / 4 KV heads of 64 with biases and sinks, 32
experts, top-4, expert ffn 512 with biases, YaRN as gpt-oss-20b's. The
tokenizer is the tiny gpt-oss fixture's o200k-style vocabulary padded with
filler tokens to 32768, so both llmk and llama.cpp load the file.

    .venv/bin/python bench/make_gptoss_model.py OUT.gguf [--type f16|q8_0]

f16 is what llama-quantize wants as its input: MXFP4_MOE gives gpt-oss's
own mix (MXFP4 experts, Q8_0 elsewhere).
"""
import argparse
import os

import numpy as np

from make_moe_model import bench_writer, finish

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "tests", "fixtures", "model", "tiny", "tiny_gptoss.gguf")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--window", type=int, default=128)
    a = ap.parse_args()
    H, L, QD, KD, X, F = a.hidden, a.layers, a.heads * a.head_dim, a.kv_heads * a.head_dim, a.experts, a.ffn
    w, V, mat, vec = bench_writer(a.out, "gpt-oss", TINY, a.type, "gpt-oss-bench", n_vocab=a.vocab)
    rng = np.random.default_rng(2)

    def bias(name, *shape):
        w.add_tensor(name, (0.02 * rng.standard_normal(shape)).astype(np.float32))

    arch = "gpt-oss"
    for key, val in (("block_count", L), ("context_length", 131072), ("embedding_length", H),
                     ("feed_forward_length", F), ("attention.head_count", a.heads),
                     ("attention.head_count_kv", a.kv_heads), ("attention.key_length", a.head_dim),
                     ("attention.value_length", a.head_dim), ("expert_count", X), ("expert_used_count", a.top_k),
                     ("expert_feed_forward_length", F), ("attention.sliding_window", a.window),
                     ("rope.scaling.original_context_length", 4096)):
        w.add_uint32(f"{arch}.{key}", val)
    for key, val in (("rope.freq_base", 150000.0), ("attention.layer_norm_rms_epsilon", 1e-5),
                     ("rope.scaling.factor", 32.0), ("rope.scaling.yarn_beta_fast", 32.0),
                     ("rope.scaling.yarn_beta_slow", 1.0)):
        w.add_float32(f"{arch}.{key}", val)
    w.add_string(f"{arch}.rope.scaling.type", "yarn")
    mat("token_embd.weight", V, H)
    mat("output.weight", V, H)
    vec("output_norm.weight", H)
    for i in range(L):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", H)
        for t, rows in (("attn_q", QD), ("attn_k", KD), ("attn_v", KD)):
            mat(p + t + ".weight", rows, H)
            bias(p + t + ".bias", rows)
        mat(p + "attn_output.weight", H, QD)
        bias(p + "attn_output.bias", H)
        bias(p + "attn_sinks.weight", a.heads)
        vec(p + "post_attention_norm.weight", H)
        mat(p + "ffn_gate_inp.weight", X, H)
        bias(p + "ffn_gate_inp.bias", X)
        mat(p + "ffn_gate_exps.weight", X, F, H)
        mat(p + "ffn_up_exps.weight", X, F, H)
        mat(p + "ffn_down_exps.weight", X, H, F)
        bias(p + "ffn_gate_exps.bias", X, F)
        bias(p + "ffn_up_exps.bias", X, F)
        bias(p + "ffn_down_exps.bias", X, H)
    finish(w)


if __name__ == "__main__":
    main()
