#!/usr/bin/env python3
"""A gemma3-shaped GGUF of realistic width with random weights, for speed
runs (bench/compare.sh -m FILE, llmk bench -m FILE). Not a test fixture.

Default shape: Gemma 3 270M's (hidden 640, 18 layers, 4 query heads and 1
KV head of 256, ffn 2048, a 262144-token vocabulary, sliding window 512 on
five layers of six, tied embeddings): ~0.27B parameters, 0.17B of them the
embedding that is also the LM head. The tokenizer is the tiny gemma3
fixture's SentencePiece vocabulary padded with filler tokens to 262144, so
both llmk and llama.cpp load the file.

    .venv/bin/python bench/make_gemma3_model.py OUT.gguf [--type f16|q8_0]

f16 is what llama-quantize wants as its input (Q8_0, Q4_K_M, ...).
"""
import argparse
import os

from make_moe_model import bench_writer, finish

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "..", "tests", "fixtures", "model", "tiny", "tiny_gemma3.gguf")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--type", choices=["f16", "q8_0"], default="f16")
    ap.add_argument("--hidden", type=int, default=640)
    ap.add_argument("--layers", type=int, default=18)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=1)
    ap.add_argument("--head-dim", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=262144)
    ap.add_argument("--window", type=int, default=512)
    a = ap.parse_args()
    H, L, HEADS, KV, HD = a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim
    w, V, mat, vec = bench_writer(a.out, "gemma3", TINY, a.type, "gemma3-bench", n_vocab=a.vocab)
    w.add_block_count(L)
    w.add_context_length(32768)
    w.add_embedding_length(H)
    w.add_feed_forward_length(a.ffn)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(a.window)
    mat("token_embd.weight", V, H)
    vec("output_norm.weight", H)
    for i in range(L):
        p = f"blk.{i}."
        vec(p + "attn_norm.weight", H)
        mat(p + "attn_q.weight", HEADS * HD, H)
        mat(p + "attn_k.weight", KV * HD, H)
        mat(p + "attn_v.weight", KV * HD, H)
        mat(p + "attn_output.weight", H, HEADS * HD)
        vec(p + "attn_q_norm.weight", HD)
        vec(p + "attn_k_norm.weight", HD)
        vec(p + "post_attention_norm.weight", H)
        vec(p + "ffn_norm.weight", H)
        mat(p + "ffn_gate.weight", a.ffn, H)
        mat(p + "ffn_up.weight", a.ffn, H)
        mat(p + "ffn_down.weight", H, a.ffn)
        vec(p + "post_ffw_norm.weight", H)
    finish(w)


if __name__ == "__main__":
    main()
