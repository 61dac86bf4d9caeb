"""A tiny random-weight gpt-oss checkpoint, converted to GGUF by llama.cpp's
own converter, its reference logits from transformers, and its o200k-style
tokenizer's ids from transformers.

The model is transformers' GptOssForCausalLM with GptOssConfig: hidden 64,
4 layers whose types alternate sliding / full starting with sliding (the
config's default; llama.cpp's loader assumes that pattern of 2, even layers
sliding, as the converter writes no pattern key), 4 query heads and 2 KV
heads of 32 (head_dim * heads = 128 != hidden: q_proj is 64 -> 128), 8
experts, top-2, expert ffn 32, sliding window 8, rms eps 1e-5, eager
attention, the eager expert loop. RoPE is gpt-oss's own YaRN (theta 150000,
factor 32, beta_fast 32, beta_slow 1, original context 4096, truncate
false), the published values: with head_dim 32 the blended dimensions 4-8
rotate enough over 10-35 positions to matter, and the attention factor
0.1 ln 32 + 1 multiplies cos and sin (so q.k by its square).

What the decode must do (transformers' modeling_gpt_oss.py, checked here):
- attention: q/k/v/o projections all with biases; split-half (NEOX) rope;
  scores q.k / sqrt(head_dim) (the YaRN attention factor is inside cos/sin);
  a per-head learned sink logit joins each query's softmax denominator only
  (softmax over [scores, sink], then the sink's column is dropped); sliding
  layers: query i sees key j iff 0 <= i - j < window.
- block: x += o_proj(attn(rmsnorm(x) * w_attn_norm)) + o bias;
  x += moe(rmsnorm(x) * w_post_attention_norm). The MoE's pre-norm is HF's
  post_attention_layernorm, stored by the converter as
  blk.N.post_attention_norm (there is no ffn_norm).
- router: logits = W x + b over 8 experts; the top-k logits are chosen, then
  softmaxed over those k alone (top-k then softmax: equal to softmax over all,
  top-k, renormalised, but not to an unrenormalised softmax-then-top-k).
- expert: g = W_gate x + b_gate, u = W_up x + b_up (HF interleaves them in
  gate_up_proj: gate = even columns, up = odd; the converter splits them),
  g = min(g, 7), u = clamp(u, -7, 7), h = g * sigmoid(1.702 g) * (u + 1),
  y = W_down h + b_down; out = sum over the chosen experts of weight * y.
- output: rmsnorm(x) * w_output_norm, then a separate (untied) lm_head.

The tokenizer is a byte-level BPE trained here behind o200k's published
split regex (llama.cpp's "gpt-4o" pre-tokenizer, GPT4O_PAT below), with
gpt-oss's special tokens appended after the ordinary vocabulary in
o200k_harmony's order (<|startoftext|>, <|endoftext|>, reserved, reserved,
<|return|>, <|constrain|>, reserved, <|channel|>, <|start|>, <|end|>,
<|message|>, reserved x3, <|call|>). The converter recognises a BPE
pre-tokenizer by hashing its output; ours is new, so that one lookup is told
"gpt-4o". The folder carries gpt-oss's chat template (harmony): the
converter puts it in tokenizer.chat_template.

Run: /tmp/refvenv/bin/python tests/ref/make_fixtures.py gptoss (pip must
reach PyPI for the llama-cpp-python sdist; nothing comes from the HF hub).
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import make_tokenizer_fixtures as mtf
import model_tiny as mt
from model_gemma3 import gguf_summary
from model_moe import LLAMACPP_VERSION, fetch_converter

SEED = 120
N_BPE = 640
TOP_K = 2
QUANTIZE = "/work/main/build/llamacpp-tools/bin/llama-quantize"

# o200k's split pattern as gpt-oss's tokenizer.json (and llama.cpp's
# LLAMA_VOCAB_PRE_TYPE_GPT4O comment) give it.
GPT4O_PAT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
             r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
             r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# o200k_harmony's special tokens from id 199998 on, in order; reserved slots
# kept so the ids keep their relative layout.
SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>",
            "<|return|>", "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>",
            "<|end|>", "<|message|>", "<|reserved_200009|>", "<|reserved_200010|>",
            "<|reserved_200011|>", "<|call|>"]

TEMPLATE_FILE = os.path.join("models", "templates", "openai-gpt-oss-120b.jinja")
FIXED_DATE = "2025-08-05"  # strftime_now's value in every rendering of the fixtures

EXTRA_TRAIN = """<|start|>user<|message|>What is the weather like today?<|end|>
<|start|>assistant<|channel|>analysis<|message|>The user asks about the weather.<|end|>
<|start|>assistant<|channel|>final<|message|>It is sunny and warm, about 24 degrees.<|return|>
You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: 2025-08-05
Reasoning: medium
# Valid channels: analysis, commentary, final. Channel must be included for every message.
CamelCaseWords and HTTPServer and iPhone XMLHttpRequest don't WON'T they'd.
path/to/file.txt /usr/local/bin and 1234567 numbers in 12,345.678 groups.
"""

CHAT_TEXT = "<|start|>user<|message|>Hi there<|end|><|start|>assistant"
EXTRA_TEXTS = [
    (CHAT_TEXT, True),
    (CHAT_TEXT, False),
    ("<|channel|>final<|message|>Done.<|return|><|call|><|endoftext|>", True),
    ("CamelCase HTTPServer iPhone don't WON'T they'd 1234567 a/b/c\r\n/x", False),
    ("  The  quick\n\n\n   brown fox 2024 ", False),
]
SEQ_TEXT = ("The lighthouse keeper climbed the stairs every evening to light the lamp, "
            "and the ships saw it from far away.")


def spec():
    return dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=32, experts=8, top_k=TOP_K, ffn_exp=32,
                sliding_window=8, ctx=131072, eps=1e-5, swiglu_alpha=1.702, swiglu_limit=7.0,
                rope=dict(rope_type="yarn", rope_theta=150000.0, factor=32.0, beta_fast=32.0, beta_slow=1.0,
                          truncate=False, original_max_position_embeddings=4096),
                pre="gpt-4o", tied=False)


def train_tokenizer():
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4O_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=N_BPE, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator([mt.TRAIN_TEXT + mtf.TRAIN_TEXT + EXTRA_TRAIN] * 4, trainer=trainer)
    n = tk.get_vocab_size()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    special = {s: tk.token_to_id(s) for s in SPECIALS}
    assert [special[s] for s in SPECIALS] == list(range(n, n + len(SPECIALS))), special
    return tk, special


def build_model(s, vocab, seed):
    import torch
    import transformers as tf

    cfg = tf.GptOssConfig(
        vocab_size=vocab, hidden_size=s["hidden"], intermediate_size=s["ffn_exp"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], head_dim=s["head_dim"],
        num_local_experts=s["experts"], num_experts_per_tok=s["top_k"], sliding_window=s["sliding_window"],
        max_position_embeddings=s["ctx"], rms_norm_eps=s["eps"], rope_parameters=dict(s["rope"]),
        swiglu_alpha=s["swiglu_alpha"], swiglu_limit=s["swiglu_limit"], attention_bias=True,
        tie_word_embeddings=False)
    cfg._attn_implementation = "eager"
    # the eager expert loop (the grouped-mm one takes no float64)
    cfg._experts_implementation = "eager"
    assert cfg.layer_types == ["sliding_attention", "full_attention"] * (s["layers"] // 2), cfg.layer_types
    torch.manual_seed(seed)
    model = tf.GptOssForCausalLM(cfg).float().eval()
    g = torch.Generator().manual_seed(seed + 1)

    def rn(shape):
        return torch.randn(shape, generator=g)

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * rn(p.shape))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(rn(p.shape))
            elif name.endswith("self_attn.sinks"):
                # around the size of the scores (scaled q.k of unit-ish rows,
                # times the YaRN factor squared): a sink takes a real share
                p.copy_(1.0 + 1.0 * rn(p.shape))
            elif name.endswith("mlp.router.weight"):
                # 4x: well separated top-2 choices (router_min_gap records it)
                p.copy_(4.0 * rn(p.shape) / np.sqrt(p.shape[-1]))
            elif name.endswith("mlp.router.bias"):
                p.copy_(0.5 * rn(p.shape))
            elif name.endswith("experts.gate_up_proj"):
                # [E, hidden, 2 ff], x @ W: gate and up of std ~3, so the clamp
                # at 7 (gate above, up both sides) is met by a few percent
                p.copy_(3.0 * rn(p.shape) / np.sqrt(p.shape[1]))
            elif name.endswith("experts.down_proj"):
                # [E, ff, hidden]; the clamped SwiGLU output is large
                p.copy_(0.25 * rn(p.shape) / np.sqrt(p.shape[1]))
            elif name.endswith("bias"):
                p.copy_(0.2 * rn(p.shape))
            else:
                fan_in = p.shape[-1]
                scale = 2.0 if name == "lm_head.weight" else 1.0
                p.copy_(scale * rn(p.shape) / np.sqrt(fan_in))
    return model


CONVERT = """
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[2:]
import convert_hf_to_gguf as c
from conversion.base import TextModel
TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-4o"
c.main()
"""


def convert(conv_dir, hf_dir, out, outtype):
    p = subprocess.run([sys.executable, "-c", CONVERT, conv_dir, hf_dir, "--outtype", outtype, "--outfile", out],
                       capture_output=True, text=True)
    if p.returncode:
        print(p.stderr[-3000:], file=sys.stderr)
        raise SystemExit("convert failed")
    return [l for l in p.stderr.splitlines() if "WARNING" in l and "MXFP4" in l]


def save_hf(model, tk, special, template, d):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    model.config.bos_token_id = special["<|startoftext|>"]
    model.config.eos_token_id = special["<|return|>"]
    model.config.pad_token_id = special["<|endoftext|>"]
    model.save_pretrained(d)
    t = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|startoftext|>", eos_token="<|return|>",
                                pad_token="<|endoftext|>")
    t.chat_template = template
    t.save_pretrained(d)
    return AutoTokenizer.from_pretrained(d)


def strftime_now_fixed(fmt):
    import datetime
    return datetime.datetime.strptime(FIXED_DATE, "%Y-%m-%d").strftime(fmt)


def render(template, messages, add_gen, **kw):
    """As transformers' apply_chat_template renders (jinja2, trim_blocks,
    lstrip_blocks), with strftime_now fixed to FIXED_DATE."""
    import jinja2.sandbox

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, **k: json.dumps(x, ensure_ascii=False)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now_fixed
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_gen, **kw)


def tokenizer_cases(tok):
    """transformers' ids of every text of the tokenizer corpus plus harmony
    texts (no BOS: gpt-oss adds none), pieces and the decoded text."""
    cases = []
    for text, special in mtf.TEXTS + EXTRA_TEXTS:
        ids = tok.encode(text, add_special_tokens=False, split_special_tokens=not special)
        cases.append({"text": text, "special": special, "ids": ids,
                      "pieces": tok.convert_ids_to_tokens(ids),
                      "decoded": tok.decode(ids, skip_special_tokens=True),
                      "decoded_special": tok.decode(ids, skip_special_tokens=False)})
    return cases


def forward(model, ids):
    import torch
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def rel_max(a, b):
    return float((np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)).max())


def window_effect(model, seqs, window):
    layers = [l.self_attn for l in model.model.layers if l.self_attn.sliding_window]
    keep = model.config.sliding_window
    out = {}
    try:
        base = {n: forward(model, ids) for n, ids in seqs}
        model.config.sliding_window = 1 << 20
        for a in layers:
            a.sliding_window = 1 << 20
        for n, ids in seqs:
            full = forward(model, ids)
            rel = np.linalg.norm(base[n] - full, axis=1) / np.linalg.norm(full, axis=1)
            out[n] = {"inside_window_max": float(rel[:window].max()),
                      "beyond_window_max": float(rel[window:].max()) if len(ids) > window else None}
    finally:
        model.config.sliding_window = keep
        for a in layers:
            a.sliding_window = keep
    return out


def variant_effects(model, seqs):
    """How far the logits move when one feature is dropped or changed: each
    must matter on every reference sequence, or the tests could not tell it
    from its absence. Also YaRN with llama.cpp's truncated correction range
    (ggml_rope_yarn_corr_dims floors/ceils it) instead of gpt-oss's
    truncate = false."""
    import copy

    import torch
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    base = {n: forward(model, ids) for n, ids in seqs}
    re = model.model.rotary_emb
    inv0, att0 = re.inv_freq.clone(), re.attention_scaling
    experts = [l.mlp.experts for l in model.model.layers]
    attn = [l.self_attn for l in model.model.layers]
    routers = [l.mlp.router for l in model.model.layers]
    out = {}

    def measure(name):
        out[name] = {n: rel_max(forward(model, ids), base[n]) for n, ids in seqs}

    # YaRN pieces
    cfg_t = copy.deepcopy(model.config)
    cfg_t.rope_parameters = dict(cfg_t.rope_parameters, truncate=True)
    inv_t, att_t = ROPE_INIT_FUNCTIONS["yarn"](cfg_t)
    assert att_t == att0
    try:
        re.inv_freq = inv_t
        measure("yarn_truncated_correction_range")
        re.inv_freq = inv0
        re.attention_scaling = 1.0
        measure("yarn_without_attention_factor")
        re.attention_scaling = att0
        d = model.config.head_dim
        re.inv_freq = 1.0 / (model.config.rope_parameters["rope_theta"] **
                             (torch.arange(0, d, 2, dtype=torch.float) / d))
        measure("yarn_without_frequency_blend")
        re.attention_scaling = 1.0
        measure("plain_rope")
    finally:
        re.inv_freq, re.attention_scaling = inv0, att0
    # sinks
    keep = [a.sinks.data.clone() for a in attn]
    try:
        for a in attn:
            a.sinks.data.fill_(-1e30)
        measure("no_sinks")
    finally:
        for a, k in zip(attn, keep):
            a.sinks.data.copy_(k)
    # clamp and alpha of the SwiGLU
    try:
        for e in experts:
            e.limit = float("inf")
        measure("no_swiglu_clamp")
    finally:
        for e in experts:
            e.limit = model.config.swiglu_limit
    try:
        for e in experts:
            e.alpha = 1.0
        measure("swiglu_alpha_1")
    finally:
        for e in experts:
            e.alpha = model.config.swiglu_alpha
    # the router: its bias, and softmax over all experts then top-k without
    # renormalising
    keep = [r.bias.data.clone() for r in routers]
    try:
        for r in routers:
            r.bias.data.zero_()
        measure("no_router_bias")
    finally:
        for r, k in zip(routers, keep):
            r.bias.data.copy_(k)
    fwd = [r.forward for r in routers]

    def softmax_then_topk(self, h):
        logits = torch.nn.functional.linear(h, self.weight, self.bias)
        p = torch.softmax(logits, dim=-1)
        v, i = torch.topk(p, self.top_k, dim=-1)
        return logits, v, i

    try:
        for r in routers:
            r.forward = softmax_then_topk.__get__(r)
        measure("softmax_then_topk_unnormalised")
    finally:
        for r, f in zip(routers, fwd):
            r.forward = f
    # expert biases
    keep = [(e.gate_up_proj_bias.data.clone(), e.down_proj_bias.data.clone()) for e in experts]
    try:
        for e in experts:
            e.gate_up_proj_bias.data.zero_()
            e.down_proj_bias.data.zero_()
        measure("no_expert_biases")
    finally:
        for e, (a, b) in zip(experts, keep):
            e.gate_up_proj_bias.data.copy_(a)
            e.down_proj_bias.data.copy_(b)
    keep = [a.o_proj.bias.data.clone() for a in attn]
    try:
        for a in attn:
            a.o_proj.bias.data.zero_()
        measure("no_o_proj_bias")
    finally:
        for a, k in zip(attn, keep):
            a.o_proj.bias.data.copy_(k)
    return out


def router_and_clamp_stats(model, seqs):
    """Per sequence: the smallest gap between the k-th and (k+1)-th router
    logit over every layer and position, and the share of gate values the
    clamp cut (above 7) and of up values (outside +-7)."""
    import torch

    out = {}
    for name, ids in seqs:
        gaps, hooks = [], []

        def rhook(mod, inp, outp):
            srt = torch.sort(outp[0].detach().double(), dim=-1, descending=True).values
            gaps.append(float((srt[:, TOP_K - 1] - srt[:, TOP_K]).min()))

        for layer in model.model.layers:
            hooks.append(layer.mlp.router.register_forward_hook(rhook))
        orig = type(model.model.layers[0].mlp.experts)._apply_gate
        calls = []

        def apply_gate(self, gate_up):
            calls.append(gate_up.detach())
            return orig(self, gate_up)

        type(model.model.layers[0].mlp.experts)._apply_gate = apply_gate
        try:
            with torch.no_grad():
                model(torch.tensor([ids]))
        finally:
            type(model.model.layers[0].mlp.experts)._apply_gate = orig
            for h in hooks:
                h.remove()
        gu = torch.cat([c.reshape(-1, c.shape[-1]) for c in calls])
        out[name] = {"router_min_gap": min(gaps),
                     "gate_clamped_share": float((gu[:, ::2] > 7.0).double().mean()),
                     "up_clamped_share": float((gu[:, 1::2].abs() > 7.0).double().mean())}
    return out


def make_mxfp4(src, dst):
    if not os.path.exists(QUANTIZE):
        return None
    p = subprocess.run([QUANTIZE, src, dst, "MXFP4_MOE"], capture_output=True, text=True)
    if p.returncode:
        print("llama-quantize MXFP4_MOE failed:", p.stderr[-1500:], file=sys.stderr)
        return None
    return QUANTIZE


def make(out_root):
    import tokenizers
    import torch
    import transformers

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    out_dir = os.path.join(out_root, "tiny")
    os.makedirs(out_dir, exist_ok=True)
    s = spec()
    tk, special = train_tokenizer()
    vocab = tk.get_vocab_size()
    model = build_model(s, vocab, SEED)
    f32 = os.path.join(out_dir, "tiny_gptoss.gguf")
    mx = os.path.join(out_dir, "tiny_gptoss_mxfp4.gguf")
    with tempfile.TemporaryDirectory() as tmp:
        conv = fetch_converter(tmp)
        with open(os.path.join(conv, TEMPLATE_FILE), encoding="utf-8") as f:
            template = f.read()
        hf = os.path.join(tmp, "hf")
        tok = save_hf(model, tk, special, template, hf)
        assert len(tok) == vocab, (len(tok), vocab)
        warnings = convert(conv, hf, f32, "f32")
    files = {"tiny_gptoss.gguf": "convert_hf_to_gguf.py --outtype f32"}
    quant = make_mxfp4(f32, mx)
    if quant:
        files["tiny_gptoss_mxfp4.gguf"] = "llama-quantize tiny_gptoss.gguf MXFP4_MOE"

    tok_cases = tokenizer_cases(tok)
    eog = [special[t] for t in ("<|return|>", "<|call|>", "<|endoftext|>")]
    rng = np.random.default_rng(SEED)
    seq_ids = tok.encode(SEQ_TEXT, add_special_tokens=False)
    chat_ids = tok.encode(CHAT_TEXT, add_special_tokens=False)
    assert chat_ids[0] == special["<|start|>"], chat_ids
    n_plain = min(special.values())
    seqs = [("text0", seq_ids[:34]), ("chat", chat_ids),
            ("rand0", rng.integers(0, n_plain, 12).tolist()),
            ("rand1", rng.integers(0, n_plain, 30).tolist())]
    records, _ = mt.run_reference(model, seqs, special["<|return|>"])
    # The stored logits are the float64 pass (the same transformers code in
    # double), rounded to f32: transformers' own fp32 drifts by up to ~1e-5
    # here (large clamped expert activations), as much as the ref path's
    # tolerance; the float64 pass leaves only the f32 rounding (~3e-8).
    arrays = {}
    model.double()
    for r in records:
        arrays[r["name"]] = forward(model, r["ids"]).astype("<f4")
        cont64 = forward(model, r["ids"] + r["continuation"])[len(r["ids"]) - 1:-1].argmax(1).tolist()
        r["greedy_matches_float64_argmax"] = cont64 == r["continuation"]
        assert r["greedy_matches_float64_argmax"], r["name"]
    model.float()
    for r in records:
        bad = [t for t in r["continuation"] if t in eog and t != special["<|return|>"]]
        assert not bad, (r["name"], r["continuation"])
    full = [(r["name"], r["ids"] + r["continuation"]) for r in records]
    effect = window_effect(model, full, s["sliding_window"])
    stats = router_and_clamp_stats(model, full)
    variants = variant_effects(model, full)
    for r in records:
        r["sliding_window_effect"] = effect[r["name"]]
        r.update(stats[r["name"]])
        assert effect[r["name"]]["inside_window_max"] < 1e-6, effect
        assert effect[r["name"]]["beyond_window_max"] > 1e-2, effect
    np.savez_compressed(os.path.join(out_dir, "tiny_gptoss_logits.npz"), **arrays)

    kv, tensors = gguf_summary(f32)
    kv_mx, tensors_mx = gguf_summary(mx) if quant else (None, None)
    re = model.model.rotary_emb
    rp = dict(model.config.rope_parameters)
    d = s["head_dim"]

    def corr_dim(rot):
        import math
        return d * math.log(rp["original_max_position_embeddings"] / (rot * 2 * math.pi)) / (
            2 * math.log(rp["rope_theta"]))

    doc = {
        "arch": "gpt-oss",
        "gguf_files": files,
        "converter": f"convert_hf_to_gguf.py of llama-cpp-python {LLAMACPP_VERSION} (sdist)",
        "converter_warnings": warnings,
        "hparams": s,
        "layer_types": list(model.config.layer_types),
        "rope": {
            "rope_parameters": rp,
            "rope_type": re.rope_type,
            "attention_factor": re.attention_scaling,
            "attention_factor_formula": "0.1 * ln(factor) + 1 (yarn_get_mscale), multiplies cos and sin",
            "correction_range": {"low": max(corr_dim(rp["beta_fast"]), 0.0),
                                 "high": min(corr_dim(rp["beta_slow"]), d - 1.0),
                                 "truncate": rp.get("truncate", True)},
            "formula": ("pos_freqs = theta^(2i/d), i = 0..d/2-1; extrap = 1/pos_freqs; interp = extrap/factor; "
                        "corr(r) = d ln(orig / (2 pi r)) / (2 ln theta); low = max(corr(beta_fast), 0), "
                        "high = min(corr(beta_slow), d - 1) (floor/ceil first only when truncate); "
                        "ramp_i = clamp((i - low) / (high - low), 0, 1); "
                        "inv_freq_i = interp_i * ramp_i + extrap_i * (1 - ramp_i); "
                        "cos/sin(pos * inv_freq) * attention_factor; split-half (NEOX) rotation"),
            "inv_freq": [float(x) for x in re.inv_freq],
        },
        "attention": {"scale": d ** -0.5, "sinks": "per head logit, softmax over [scores, sink], sink dropped",
                      "sliding_window_rule": "a sliding layer's query at position i sees keys j with 0 <= i - j < "
                                             "sliding_window; layer_types alternate, layer 0 sliding"},
        "router": "logits = W x + b; top-k logits; softmax over the k chosen",
        "expert_activation": "g = min(g, limit); u = clamp(u, -limit, limit); h = g * sigmoid(alpha * g) * (u + 1); "
                             "alpha 1.702, limit 7.0 (not in the GGUF: llama.cpp hardcodes both)",
        "variant_effects_rel_l2_max": variants,
        "logits": "transformers' float64 forward pass rounded to f32 (fp32_vs_fp64_rel_l2_max: its fp32 pass)",
        "n_vocab": vocab,
        "seed": SEED,
        "pre_tokenizer_regex": GPT4O_PAT,
        "special_ids": special,
        "bos_token_id": special["<|startoftext|>"],
        "eos_token_id": special["<|return|>"],
        "eog_ids_llama_cpp": sorted(eog),
        "add_bos": False,
        "n_greedy": mt.N_GREEDY,
        "gguf_metadata": kv,
        "gguf_tensors": tensors,
        "gguf_tensors_mxfp4": tensors_mx,
        "tokenize": tok_cases,
        "sequences": records,
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest(),
        "chat_template_source": f"llama-cpp-python {LLAMACPP_VERSION} sdist, vendor/llama.cpp/{TEMPLATE_FILE} "
                                "(OpenAI's published gpt-oss chat_template.jinja)",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__},
    }
    with open(os.path.join(out_dir, "tiny_gptoss.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"gpt-oss: vocab {vocab}, files {list(files)}, layer types {model.config.layer_types}", flush=True)
    for r in records:
        print(f"  {r['name']}: {len(r['ids'])} ids, margin {r['greedy_min_margin']:.4f}, router gap "
              f"{r['router_min_gap']:.4f}, clamp {r['gate_clamped_share']:.3f}/{r['up_clamped_share']:.3f}, "
              f"fp32-vs-fp64 {r['fp32_vs_fp64_rel_l2_max']:.2e}, window "
              f"{r['sliding_window_effect']['beyond_window_max']:.3f}, agree "
              f"{r['greedy_matches_teacher_forced_argmax']}, stopped {r['stopped_at_eos']}", flush=True)
    for k, v in variants.items():
        print(f"  {k}: {min(v.values()):.2e} .. {max(v.values()):.2e}", flush=True)
