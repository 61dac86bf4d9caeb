"""A tiny random-weight Gemma 3 checkpoint, converted to GGUF by llama.cpp's
own converter, its reference logits from transformers, and its
SentencePiece tokenizer's ids from transformers' Gemma tokenizer.

The model is transformers' Gemma3ForCausalLM (text only): six layers in
Gemma 3's default pattern of 6 (layers 0-4 sliding-window attention, layer 5
global; llama.cpp's converter writes no pattern key, so a GGUF reader must
assume 6), a sliding window of 8 tokens so every reference sequence runs past
it, per-layer-type RoPE (global layers theta 1e6 with linear scaling 8,
sliding layers theta 1e4 — the base llama.cpp assumes when the file has no
`gemma3.rope.freq_base_swa` key), q/k RMSNorm, the four norms around each
block, GELU (tanh) gate, embeddings scaled by sqrt(hidden) and tied to the
output. Weights are re-drawn as model_tiny.py does; Gemma3RMSNorm computes
x * (1 + w), so norm weights are drawn around 0 (around 2 for the post-attention
and post-MLP norms) and the converter writes 1 + w.

The tokenizer is a SentencePiece BPE trained here with Gemma's settings: byte
fallback, no dummy prefix, identity normalisation, digits split, whitespace
kept (runs of spaces become pieces), pad/eos/bos/unk = 0/1/2/3, `<mask>` a
control symbol and `<start_of_turn>` / `<end_of_turn>` user-defined symbols.
The Hugging Face folder holds that `tokenizer.model` (the converter takes its
sentencepiece branch and writes add_space_prefix = false), a
tokenizer_config.json that marks the turn tokens special as Gemma 3's does
(so the GGUF types them CONTROL), and Gemma 3's published chat template.

Run: /tmp/refvenv/bin/python tests/ref/make_fixtures.py gemma3 (pip must
reach PyPI for the llama-cpp-python sdist; nothing comes from the HF hub).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import make_tokenizer_fixtures as mtf
import model_tiny as mt
from model_moe import LLAMACPP_VERSION, fetch_converter

SEED = 31
N_VOCAB_SPM = 720

# Gemma 3's chat template as google/gemma-3-*-it publish it in
# tokenizer_config.json (facts of the format: <bos>, a system message folded
# into the first user turn after a blank line, roles alternating, assistant
# written "model", content trimmed, image items).
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n")

EXTRA_TRAIN = """<start_of_turn>user
What is the weather like today?<end_of_turn>
<start_of_turn>model
It is sunny and warm, about 24 degrees.<end_of_turn>
Gemma models use a SentencePiece vocabulary with byte fallback; digits 0123456789 are single pieces.
    Four spaces, eight        spaces, and	tabs		here.
The lighthouse keeper climbed the stairs every evening to light the lamp.
"""

# texts of the reference sequences and extra tokenizer cases: chat turns
# (special tokens parsed) and the same text with them as plain text
CHAT_TEXT = "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
EXTRA_TEXTS = [
    (CHAT_TEXT, True),
    (CHAT_TEXT, False),
    ("<start_of_turn><end_of_turn>x<bos>y<eos>", True),
    ("  The  quick\n\n\n   brown fox 2024 ", False),
]
SEQ_TEXT = ("The lighthouse keeper climbed the stairs every evening to light the lamp, "
            "and the ships saw it from far away.")


def spec():
    return dict(hidden=64, layers=6, heads=4, kv_heads=2, head_dim=32, ffn=128, ctx=256,
                sliding_window=8, sliding_window_pattern=6, query_pre_attn_scalar=32,
                rope_global=dict(rope_type="linear", factor=8.0, rope_theta=1000000.0),
                rope_local=dict(rope_type="default", rope_theta=10000.0),
                eps=1e-6, act="gelu_pytorch_tanh", tied=True, final_logit_softcapping=None,
                attn_logit_softcapping=None)


def train_spm(d):
    import sentencepiece as spm

    path = os.path.join(d, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(mt.TRAIN_TEXT + mtf.TRAIN_TEXT + EXTRA_TRAIN * 3)
    prefix = os.path.join(d, "sp")
    spm.SentencePieceTrainer.train(
        input=path, model_prefix=prefix, model_type="bpe", vocab_size=N_VOCAB_SPM,
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        add_dummy_prefix=False, remove_extra_whitespaces=False, split_digits=True,
        split_by_whitespace=False, allow_whitespace_only_pieces=True, num_threads=1,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
        bos_piece="<bos>", unk_piece="<unk>", control_symbols=["<mask>"],
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>"], minloglevel=2)
    return prefix + ".model"


def build_model(s, vocab, seed):
    import torch
    import transformers as tf

    cfg = tf.Gemma3TextConfig(
        vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
        max_position_embeddings=s["ctx"], rms_norm_eps=s["eps"], hidden_activation=s["act"],
        query_pre_attn_scalar=s["query_pre_attn_scalar"], sliding_window=s["sliding_window"],
        rope_parameters={"full_attention": dict(s["rope_global"]), "sliding_attention": dict(s["rope_local"])},
        final_logit_softcapping=s["final_logit_softcapping"],
        attn_logit_softcapping=s["attn_logit_softcapping"], tie_word_embeddings=s["tied"],
        attention_bias=False, pad_token_id=0, eos_token_id=1, bos_token_id=2)
    cfg._attn_implementation = "eager"
    want = ["sliding_attention"] * (s["sliding_window_pattern"] - 1) + ["full_attention"]
    assert cfg.layer_types == want * (s["layers"] // s["sliding_window_pattern"]), cfg.layer_types
    torch.manual_seed(seed)
    model = tf.Gemma3ForCausalLM(cfg).float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                # used as 1 + w. The two norms after attention and the MLP
                # get w around 2: block outputs then outweigh the (tied)
                # input embedding in the residual, otherwise greedy decoding
                # just repeats the last token.
                post = "post_attention_layernorm" in name or "post_feedforward_layernorm" in name
                p.copy_((2.0 if post else 0.0) + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                # the embedding is scaled by sqrt(hidden) = 8 on the way in and
                # is the output matrix too: unit-variance rows would give
                # logits of ~8 * |h| spread; 1/4 keeps them like the others'
                p.copy_(0.25 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[-1]))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model


def save_hf(model, spm_path, d):
    from transformers import AutoTokenizer, GemmaTokenizer

    model.save_pretrained(d)
    shutil.copy(spm_path, os.path.join(d, "tokenizer.model"))
    tok = GemmaTokenizer.from_pretrained(d, mask_token="<mask>", add_bos_token=True, add_eos_token=False)
    tok.chat_template = GEMMA3_TEMPLATE
    tok.save_pretrained(d)
    # Gemma 3's tokenizer_config.json lists every control and turn token in
    # added_tokens_decoder as special; llama.cpp's converter reads that list
    # (not tokenizer.json) to type them CONTROL in the GGUF.
    cfg_path = os.path.join(d, "tokenizer_config.json")
    with open(cfg_path, encoding="utf-8") as f:
        cfg = json.load(f)
    added = {}
    for i, t in sorted(tok.added_tokens_decoder.items()):
        added[str(i)] = {"content": t.content, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
    cfg["added_tokens_decoder"] = added
    cfg["add_bos_token"] = True
    cfg["add_eos_token"] = False
    cfg["chat_template"] = GEMMA3_TEMPLATE
    cfg.pop("vocab_file", None)
    with open(cfg_path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False)
    # reload as a user would: the folder alone
    return AutoTokenizer.from_pretrained(d)


CONVERT = """
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
import convert_hf_to_gguf as c
c.main()
"""


def convert(conv_dir, hf_dir, out, outtype):
    subprocess.run([sys.executable, "-c", CONVERT, conv_dir, hf_dir, "--outtype", outtype, "--outfile", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tokenizer_cases(tok, sp):
    """HF ids of every text of the tokenizer corpus (make_tokenizer_fixtures'
    TEXTS) plus Gemma turn texts: without special tokens added, and with the
    BOS the tokenizer adds by default; sentencepiece's own ids as a cross-check."""
    cases = []
    for text, special in mtf.TEXTS + EXTRA_TEXTS:
        ids = tok.encode(text, add_special_tokens=False, split_special_tokens=not special)
        with_bos = tok.encode(text, add_special_tokens=True, split_special_tokens=not special)
        assert with_bos == [tok.bos_token_id] + ids, (text, with_bos)
        # sentencepiece always keeps its user-defined symbols whole and never
        # parses control-token text: compare only texts without either
        marked = any(t in text for t in tok.all_special_tokens + ["<start_of_turn>", "<end_of_turn>"])
        sp_ids = None if marked else sp.encode(text)
        cases.append({"text": text, "special": special, "ids": ids, "ids_with_bos": with_bos,
                      "pieces": tok.convert_ids_to_tokens(ids),
                      "decoded": tok.decode(with_bos, skip_special_tokens=True),
                      "sentencepiece_agrees": None if sp_ids is None else sp_ids == ids})
    return cases


def window_effect(model, seqs, window):
    """Max relative L2 change of the logits, per sequence, when the sliding
    layers see everything: 0 before position `window`, clearly nonzero after
    (the fixture would not test the window otherwise)."""
    import torch

    layers = [l.self_attn for l in model.model.layers if l.self_attn.is_sliding]
    keep = model.config.sliding_window
    out = {}
    try:
        with torch.no_grad():
            base = {n: model(torch.tensor([ids])).logits[0].double().numpy() for n, ids in seqs}
            model.config.sliding_window = 1 << 20
            for a in layers:
                a.sliding_window = 1 << 20
            for n, ids in seqs:
                full = model(torch.tensor([ids])).logits[0].double().numpy()
                rel = np.linalg.norm(base[n] - full, axis=1) / np.linalg.norm(full, axis=1)
                out[n] = {"inside_window_max": float(rel[:window].max()),
                          "beyond_window_max": float(rel[window:].max()) if len(ids) > window else None}
    finally:
        model.config.sliding_window = keep
        for a in layers:
            a.sliding_window = keep
    return out


def rope_report(model):
    re = model.model.rotary_emb
    return {lt: {"rope_type": re.rope_type[lt], "rope_theta": model.config.rope_parameters[lt]["rope_theta"],
                 "factor": model.config.rope_parameters[lt].get("factor"),
                 "inv_freq_first_last": [float(getattr(re, f"{lt}_inv_freq")[0]),
                                         float(getattr(re, f"{lt}_inv_freq")[-1])]}
            for lt in re.layer_types}


def gguf_summary(path):
    """Every metadata key (token arrays summarised) and every tensor name,
    shape and type, as gguf-py reads them from the converted file."""
    import gguf

    r = gguf.GGUFReader(path)
    kv = {}
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        t = f.types[0] if f.types else None
        if t == gguf.GGUFValueType.ARRAY:
            kv[name] = f"array[{len(f.data)}]"
        elif t == gguf.GGUFValueType.STRING:
            s = bytes(f.parts[f.data[0]]).decode("utf-8")
            kv[name] = s if len(s) <= 80 else f"string[{len(s)}]"
        else:
            v = f.parts[f.data[0]].tolist()
            kv[name] = v[0] if len(v) == 1 else v
    tensors = {t.name: {"shape": [int(x) for x in t.shape], "type": t.tensor_type.name} for t in r.tensors}
    return kv, tensors


def make(out_root):
    import sentencepiece
    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out_dir = os.path.join(out_root, "tiny")
    os.makedirs(out_dir, exist_ok=True)
    s = spec()
    files = {"tiny_gemma3.gguf": "f32", "tiny_gemma3_q8_0.gguf": "q8_0"}
    with tempfile.TemporaryDirectory() as tmp:
        spm_path = train_spm(tmp)
        sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
        vocab = sp.get_piece_size()
        model = build_model(s, vocab, SEED)
        hf = os.path.join(tmp, "hf")
        tok = save_hf(model, spm_path, hf)
        assert len(tok) == vocab, (len(tok), vocab)
        conv = fetch_converter(tmp)
        for fn, outtype in files.items():
            convert(conv, hf, os.path.join(out_dir, fn), outtype)
    special = {t: tok.convert_tokens_to_ids(t) for t in
               ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>")}
    tok_cases = tokenizer_cases(tok, sp)
    sp_bad = [c["text"] for c in tok_cases if c["sentencepiece_agrees"] is False]
    assert not sp_bad, sp_bad

    bos, eot = special["<bos>"], special["<end_of_turn>"]
    rng = np.random.default_rng(SEED)
    seq_ids = tok.encode(SEQ_TEXT)  # with the BOS, as Gemma is run
    chat_ids = tok.encode(CHAT_TEXT)
    assert len(seq_ids) > 2 * s["sliding_window"], len(seq_ids)
    seqs = [("text0", seq_ids), ("chat", chat_ids),
            ("rand0", [bos] + rng.integers(4, vocab, 11).tolist()),
            ("rand1", [bos] + rng.integers(4, vocab, 29).tolist())]
    # greedy stops at <end_of_turn> (what generation ends at); <eos> is an
    # end of generation for llmk too, so it must not turn up earlier
    records, arrays = mt.run_reference(model, seqs, eot)
    for r in records:
        assert special["<eos>"] not in r["continuation"], r
    effect = window_effect(model, [(r["name"], r["ids"] + r["continuation"]) for r in records],
                           s["sliding_window"])
    for r in records:
        r["sliding_window_effect"] = effect[r["name"]]
        assert effect[r["name"]]["inside_window_max"] < 1e-6, effect
        assert effect[r["name"]]["beyond_window_max"] > 1e-2, effect
    np.savez_compressed(os.path.join(out_dir, "tiny_gemma3_logits.npz"), **arrays)
    kv, tensors = gguf_summary(os.path.join(out_dir, "tiny_gemma3.gguf"))
    _, tensors_q8 = gguf_summary(os.path.join(out_dir, "tiny_gemma3_q8_0.gguf"))
    doc = {
        "arch": "gemma3",
        "gguf_files": files,
        "converter": f"convert_hf_to_gguf.py of llama-cpp-python {LLAMACPP_VERSION} (sdist)",
        "hparams": s,
        "layer_types": list(model.config.layer_types),
        "rope": rope_report(model),
        "embed_scale": float(model.model.embed_tokens.embed_scale),
        "attention_scaling": s["query_pre_attn_scalar"] ** -0.5,
        "sliding_window_rule": "a sliding layer's query at position i sees keys j with i - j < sliding_window",
        "n_vocab": vocab,
        "seed": SEED,
        "special_ids": special,
        "bos_token_id": bos,
        "eos_token_id": special["<eos>"],
        "eot_token_id": eot,
        "add_bos": True,
        "n_greedy": mt.N_GREEDY,
        "gguf_metadata": kv,
        "gguf_tensors": tensors,
        "gguf_tensors_q8_0": tensors_q8,
        "tokenize": tok_cases,
        "sequences": records,
        "chat_template": GEMMA3_TEMPLATE,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "sentencepiece": sentencepiece.__version__,
                     "numpy": np.__version__},
    }
    with open(os.path.join(out_dir, "tiny_gemma3.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"gemma3: vocab {vocab}, files {list(files)}, layer types {model.config.layer_types}", flush=True)
    for r in records:
        print(f"  {r['name']}: {len(r['ids'])} ids, margin {r['greedy_min_margin']:.4f}, "
              f"fp32-vs-fp64 {r['fp32_vs_fp64_rel_l2_max']:.2e}, window effect "
              f"{r['sliding_window_effect']['beyond_window_max']:.3f}, "
              f"agree {r['greedy_matches_teacher_forced_argmax']}, stopped {r['stopped_at_eos']}", flush=True)
