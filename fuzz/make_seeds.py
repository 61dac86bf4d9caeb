"""Write the generated seeds of the fuzz corpora, deterministically (same bytes on every run).

  fuzz/corpus/gguf/valid_ggufpy_*   GGUF reader: files by an independent writer (PyPI gguf), so
                                    the replay also checks that llmk opens files it did not write
                                    (the other gguf seeds come from `test_gguf --write-corpus`)
  fuzz/corpus/tokenizer/valid_*     tokenizer target: vocabulary GGUF + text
  fuzz/corpus/model/valid_*         model target: small llama / qwen2 / qwen3 models that load
  fuzz/corpus/chat/valid_*          chat target: template (text or GGUF) + messages JSON
  fuzz/corpus/serve/{valid,bad}_*   serve target: OpenAI request bodies llmk serve accepts / refuses
  fuzz/corpus/safetensors/{valid,bad}_*  safetensors reader: small files (numpy bytes, the format's
                                    layout) it opens / each refused by one of its checks
  fuzz/corpus/hf/{valid,bad}_*      HF folder target: config.json + tokenizer.json +
                                    tokenizer_config.json (from tests/fixtures/hf) / refused ones
  fuzz/corpus/json_schema/{valid,bad}_*  JSON Schema converter: schemas it converts / refuses

Input layouts are documented at the top of fuzz/fuzz_{tokenizer,model,chat,serve}.c. Files named
valid_* must go all the way through their target (tests/test_fuzz_corpus.c checks it); other
generated names (bad_*) are refusals worth keeping; inputs the fuzzer found are named found_<sha1>.
Run from anywhere: .venv/bin/python fuzz/make_seeds.py
"""
import json
import os
import struct
import tempfile

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(HERE, "corpus")
FIX = os.path.join(ROOT, "tests", "fixtures")
Q = GGMLQuantizationType


def gguf_bytes(arch, fill):
    """The bytes of a GGUF file that `fill(writer)` populates."""
    fd, path = tempfile.mkstemp(suffix=".gguf")
    os.close(fd)
    try:
        w = GGUFWriter(path, arch)
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def put(kind, name, data):
    d = os.path.join(CORPUS, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def two_part(first, second):
    """Layout of the tokenizer and chat bodies: u32 LE length, first part, second part."""
    return struct.pack("<I", len(first)) + first + second


# ---- GGUF reader ---------------------------------------------------------------------------


def write_gguf_seed(name, arch, with_tensors):
    def fill(w):
        w.add_block_count(2)
        w.add_context_length(64)
        w.add_embedding_length(32)
        w.add_head_count(4)
        w.add_float32(f"{arch}.rope.freq_base", 10000.0)
        w.add_float64("test.f64", -0.125)
        w.add_int8("test.i8", -5)
        w.add_uint16("test.u16", 65535)
        w.add_int64("test.i64", -(2**40))
        w.add_bool("test.bool", True)
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_array("tokenizer.ggml.tokens", ["a", "b", "Ġc", "<|im_end|>"])
        w.add_array("tokenizer.ggml.scores", [0.0, -1.0, -2.5, 3.0])
        w.add_array("test.nested", [[1, 2], [3]])
        if with_tensors:
            rng = np.random.default_rng(7)
            w.add_tensor("token_embd.weight", rng.standard_normal((4, 32)).astype(np.float32))
            w.add_tensor("output_norm.weight", rng.standard_normal(32).astype(np.float16))
            q = rng.integers(0, 255, size=(2, 2 * 20), dtype=np.uint8)  # 2 rows of 64 q4_1 values
            w.add_tensor("blk.0.attn_q.weight", q, raw_dtype=Q.Q4_1)

    put("gguf", name, gguf_bytes(arch, fill))


# ---- tokenizer -----------------------------------------------------------------------------


def gpt2_alphabet():
    """GPT-2's byte-level alphabet: the character standing for each byte."""
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def merges_for(words):
    """Tokens and merges that build each word left to right from single characters."""
    tokens, merges = [], []
    for w in words:
        for i in range(2, len(w) + 1):
            left, right = w[: i - 1], w[i - 1]
            if w[:i] not in tokens:
                tokens.append(w[:i])
                merges.append(f"{left} {right}")
    return tokens, merges


def ids_as_text(ids, n_vocab):
    """Printable ASCII whose byte pairs, read as little-endian 16-bit ids modulo n_vocab (the
    tokenizer target's raw id sequence), are ids."""
    out = b""
    for i in ids:
        out += next(bytes([b0, b1]) for b1 in range(0x20, 0x7F) for b0 in range(0x20, 0x7F)
                    if (b0 | b1 << 8) % n_vocab == i)
    return out


def tok_fill(model, tokens, types=None, scores=None, merges=None, pre=None, bos=None, eos=None,
             eot=None, unk=None, add_bos=None, add_space_prefix=None):
    def fill(w):
        w.add_tokenizer_model(model)
        if pre is not None:
            w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        if types is not None:
            w.add_token_types(types)
        if scores is not None:
            w.add_token_scores(scores)
        if merges is not None:
            w.add_token_merges(merges)
        for key, v in (("bos", bos), ("eos", eos), ("eot", eot), ("unknown", unk)):
            if v is not None:
                w.add_uint32(f"tokenizer.ggml.{key}_token_id", v)
        if add_bos is not None:
            w.add_add_bos_token(add_bos)
        if add_space_prefix is not None:
            w.add_add_space_prefix(add_space_prefix)

    return fill


TEXTS = {
    "prose": "Hello, world! How are you today? I'm sure they'll say it's fine.\n"
             "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
             "Numbers: 0 7 42 1234 3.14159 1,000,000\r\n\ttabs  and   spaces  ",
    "unicode": "Café naïve Ærøskøbing 你好，世界！ 한국어 مرحبا Привет Ελληνικά "
               "😀👍🏽🇺🇸 👨\u200d👩\u200d👧 x²+y² ½ ① ٣٤٥ ४२ \xa0\u2003\u3000\x85\u180e\u200b end",
    "special": "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
               "text<|endoftext|>more <|eot_id|><s></s><unk> <|im_start partial <| im_end|> <0x41>",
}


def write_tokenizer_seeds():
    # The reference tokenizers of tests/fixtures/tokenizer (trained by tests/ref/): realistic
    # vocabularies, one per pre-tokenizer family the fixtures cover.
    for fix in ("tiny_llama_bpe", "tiny_qwen2", "tiny_spm"):
        with open(os.path.join(FIX, "tokenizer", fix + ".gguf"), "rb") as f:
            image = f.read()
        for label, text in TEXTS.items():
            put("tokenizer", f"valid_{fix}_{label}", two_part(image, text.encode()))

    # Byte-level BPE with the whole byte alphabet, merges, control and user-defined tokens.
    alpha = gpt2_alphabet()
    words, merges = merges_for(["Ġthe", "Ġa", "in", "ing", "Ġin", "he", "12", "Ġ1", "ĊĊ", "ĠĠ"])
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"]
    tokens = alpha + words + specials
    types = [1] * (len(alpha) + len(words)) + [3, 3, 3, 4]
    eos = tokens.index("<|im_end|>")
    for pre in ("smollm", "gpt2", "llama3", "qwen2"):
        fill = tok_fill("gpt2", tokens, types=types, merges=merges, pre=pre, bos=eos - 2, eos=eos)
        text = TEXTS["special"] + " the thing 12345 in<tool>ing\n\n  x " + TEXTS["unicode"][:40]
        put("tokenizer", f"valid_bpe_bytes_{pre}", two_part(gguf_bytes("llama", fill), text.encode()))

    # Small byte-level vocabularies (bytes outside them are dropped) for the other pre-tokenizer
    # names and for "no pre key" (default) and "no token types".
    small, small_merges = merges_for(["ab", "abc", "Ġa", "Ġab"])
    small = ["a", "b", "c", "Ġ", "1", "2"] + small
    for pre in (None, "default", "starcoder", "refact", "llama-bpe"):
        fill = tok_fill("gpt2", small, merges=small_merges, pre=pre)
        put("tokenizer", f"valid_bpe_small_{pre or 'nopre'}",
            two_part(gguf_bytes("llama", fill), b"abc ab a12 cab  \xc3\xa9 'S 'll 123456"))

    # Harmony's markers (gpt-oss) in a byte-level vocabulary: the fuzz target splits the
    # encoded reply by channel (llmk_harmony_text); the same bytes read as ids put markers
    # between the byte tokens of a character.
    markers = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"]
    h_words, h_merges = merges_for(["analysis", "final", "assistant"])
    h_tokens = alpha + h_words + markers
    h_types = [1] * (len(alpha) + len(h_words)) + [3] * len(markers)
    fill = tok_fill("gpt2", h_tokens, types=h_types, merges=h_merges, pre="gpt2",
                    eos=h_tokens.index("<|return|>"))
    reply = ("<|channel|>analysis<|message|>think \u00e9<|end|><|start|>assistant<|channel|>final"
             "<|message|>Caf\u00e9 \U0001F600<|return|>").encode()
    # Read as ids: an analysis message cut by <|end|> after the first byte of "\u00e9", whose
    # second byte then opens a final message.
    ids = [h_tokens.index(x) for x in ["<|channel|>", *"analysis", "<|message|>"]] + [0xC3]
    ids += [h_tokens.index(x) for x in ["<|end|>", "<|channel|>", "f", "<|message|>"]] + [0xA9]
    ids += [h_tokens.index("<|return|>")]
    reply += b" " * (len(reply) % 2) + ids_as_text(ids, len(h_tokens))
    put("tokenizer", "valid_bpe_harmony", two_part(gguf_bytes("llama", fill), reply))

    # SentencePiece: byte fallback, scores, unknown, control and user-defined tokens.
    spm = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    spm_types = [2, 3, 3] + [6] * 256
    pieces = ["▁", "▁t", "▁th", "▁the", "h", "e", "t", "▁a", "a", "n", "▁an", "d", "▁and", "é",
              "▁▁", "<user>", "😀"]
    spm_scores = [0.0] * len(spm) + [-float(i) for i in range(len(pieces))]
    spm += pieces
    spm_types += [1] * (len(pieces) - 2) + [4, 1]
    text = "the and  an thé <user>x<s> </s>😀 ünknown\n\tend ".encode()
    for label, kw in (("prefix", {}), ("noprefix", {"add_space_prefix": False}),
                      ("nobos", {"add_bos": False})):
        fill = tok_fill("llama", spm, types=spm_types, scores=spm_scores, bos=1, eos=2, unk=0, **kw)
        put("tokenizer", f"valid_spm_{label}", two_part(gguf_bytes("llama", fill), text))
    # No byte tokens and no unknown: unencodable characters are dropped.
    bare = ["▁", "a", "b", "▁a", "ab"]
    fill = tok_fill("llama", bare, scores=[-1.0, -2.0, -2.0, -0.5, -0.25])
    put("tokenizer", "valid_spm_bare", two_part(gguf_bytes("llama", fill), "ab a  ba\u00ffz".encode()))


# ---- model ---------------------------------------------------------------------------------

F16_SCALE = np.float16(0.01).tobytes()


def kquant_rows(rng, qtype, rows, cols):
    """Random K-quant blocks with small sane scales (gguf-py has no K-quant encoder)."""
    per_block = {Q.Q4_K: 144, Q.Q6_K: 210}[qtype]
    data = rng.integers(0, 256, size=(rows, cols // 256, per_block), dtype=np.uint8)
    for pos in ((0, 2) if qtype == Q.Q4_K else (208,)):  # d (and dmin) of each block
        data[:, :, pos:pos + 2] = np.frombuffer(F16_SCALE, dtype=np.uint8)
    return data.reshape(rows, -1)


def model_fill(arch, E=8, H=2, HKV=1, HD=None, FF=16, L=1, types=None, rope=None, bias=False,
               qk_norm=False, separate_output=False, tokenizer="spm", seed=1, moe=None):
    """A tiny model; types maps a tensor kind (embd, attn, ffn_down, ...) to a codec."""
    types = types or {}
    rng = np.random.default_rng(seed)
    hd = HD or E // H
    if tokenizer == "spm":
        vocab = ["<unk>", "<s>", "</s>", "▁", "▁H", "▁Hi", "i", "▁t", "h", "e", "r", "▁the",
                 "▁there"] + [f"<0x{b:02X}>" for b in range(32, 48)]
    else:
        vocab, merges = merges_for(["Hi", "Ġthere", "Ġt", "Ġth"])
        vocab = ["H", "i", "Ġ", "t", "h", "e", "r", "<|im_end|>"] + vocab
    V = len(vocab)

    def tensor(w, name, kind, ne0, ne1=1, norm=False, ne2=None):
        qtype = types.get(kind, Q.F32)
        if ne2:  # an expert stack: F32 or a quantized type gguf-py writes
            x = (0.3 * rng.standard_normal((ne2, ne1, ne0))).astype(np.float32)
            if qtype == Q.F32:
                w.add_tensor(name, x)
            else:
                w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)
            return
        if qtype in (Q.Q4_K, Q.Q6_K):
            w.add_tensor(name, kquant_rows(rng, qtype, ne1, ne0), raw_dtype=qtype)
            return
        x = (1.0 + 0.1 * rng.standard_normal((ne1, ne0)) if norm
             else 0.3 * rng.standard_normal((ne1, ne0))).astype(np.float32)
        if ne1 == 1:
            x = x.reshape(ne0)
        if qtype == Q.F32:
            w.add_tensor(name, x)
        elif qtype == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, quantize(x, qtype), raw_dtype=qtype)

    def fill(w):
        w.add_block_count(L)
        w.add_context_length(64)
        w.add_embedding_length(E)
        w.add_feed_forward_length(FF)
        w.add_head_count(H)
        w.add_head_count_kv(HKV)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        if moe:
            w.add_expert_count(moe[0])
            w.add_expert_used_count(moe[1])
            w.add_expert_feed_forward_length(moe[2])
        if HD:
            w.add_key_length(HD)
            w.add_value_length(HD)
        if rope == "llama3":
            w.add_string(f"{arch}.rope.scaling.type", "llama3")
            w.add_rope_scaling_factor(8.0)
            w.add_rope_scaling_orig_ctx_len(16)
            w.add_float32(f"{arch}.rope.scaling.low_freq_factor", 1.0)
            w.add_float32(f"{arch}.rope.scaling.high_freq_factor", 4.0)
        elif rope == "linear":
            w.add_string(f"{arch}.rope.scaling.type", "linear")
            w.add_rope_scaling_factor(2.0)
        if tokenizer == "spm":
            w.add_tokenizer_model("llama")
            w.add_token_list(vocab)
            w.add_token_types([2, 3, 3] + [1] * 10 + [6] * 16)
            w.add_token_scores([0.0] * 3 + [-float(i) for i in range(V - 3)])
            w.add_bos_token_id(1)
            w.add_eos_token_id(2)
        else:
            w.add_tokenizer_model("gpt2")
            w.add_tokenizer_pre("qwen2")
            w.add_token_list(vocab)
            w.add_token_types([1] * 7 + [3] + [1] * (V - 8))
            w.add_token_merges(merges)
            w.add_eos_token_id(7)
        tensor(w, "token_embd.weight", "embd", E, V)
        tensor(w, "output_norm.weight", "norm", E, norm=True)
        if separate_output:
            tensor(w, "output.weight", "output", E, V)
        if rope == "llama3":
            w.add_tensor("rope_freqs.weight", np.linspace(1.0, 8.0, hd // 2, dtype=np.float32))
        for il in range(L):
            p = f"blk.{il}."
            tensor(w, p + "attn_norm.weight", "norm", E, norm=True)
            tensor(w, p + "attn_q.weight", "attn", E, H * hd)
            tensor(w, p + "attn_k.weight", "attn_k", E, HKV * hd)
            tensor(w, p + "attn_v.weight", "attn_v", E, HKV * hd)
            tensor(w, p + "attn_output.weight", "attn_out", H * hd, E)
            if bias:
                for n, width in (("q", H * hd), ("k", HKV * hd), ("v", HKV * hd)):
                    tensor(w, p + f"attn_{n}.bias", "bias", width)
            if qk_norm:
                tensor(w, p + "attn_q_norm.weight", "norm", hd, norm=True)
                tensor(w, p + "attn_k_norm.weight", "norm", hd, norm=True)
            tensor(w, p + "ffn_norm.weight", "norm", E, norm=True)
            if moe:
                X, _, FE = moe
                tensor(w, p + "ffn_gate_inp.weight", "router", E, X)
                tensor(w, p + "ffn_gate_exps.weight", "exps", E, FE, ne2=X)
                tensor(w, p + "ffn_up_exps.weight", "exps", E, FE, ne2=X)
                tensor(w, p + "ffn_down_exps.weight", "exps_down", FE, E, ne2=X)
                continue
            tensor(w, p + "ffn_gate.weight", "ffn", E, FF)
            tensor(w, p + "ffn_up.weight", "ffn_up", E, FF)
            tensor(w, p + "ffn_down.weight", "ffn_down", FF, E)

    return fill


def write_model_seeds():
    seeds = {
        "llama": ("llama", {}),
        "llama_gqa_rope3": ("llama", dict(E=8, H=4, HKV=2, L=2, rope="llama3", separate_output=True,
                                          types={"output": Q.F16})),
        "llama_quant_linear": ("llama", dict(E=32, H=2, HKV=2, FF=32, rope="linear", seed=2,
                                             types={"embd": Q.Q8_0, "attn": Q.Q4_0, "attn_k": Q.Q4_1,
                                                    "attn_v": Q.Q5_0, "attn_out": Q.Q5_1,
                                                    "ffn": Q.BF16, "ffn_up": Q.F16,
                                                    "ffn_down": Q.Q8_0, "norm": Q.F16})),
        "llama_kquant": ("llama", dict(E=32, H=4, HKV=1, FF=256, seed=3,
                                       types={"ffn_down": Q.Q6_K, "ffn": Q.Q8_0, "ffn_up": Q.Q8_0})),
        "qwen2": ("qwen2", dict(bias=True, tokenizer="bpe", seed=4)),
        "qwen2_f16_bias": ("qwen2", dict(E=16, H=2, HKV=1, L=2, bias=True, tokenizer="bpe", seed=5,
                                         types={"bias": Q.F16, "attn": Q.F16})),
        "qwen3": ("qwen3", dict(E=8, H=2, HKV=1, HD=8, qk_norm=True, tokenizer="bpe", seed=6)),
        "qwen3_gqa": ("qwen3", dict(E=16, H=4, HKV=2, HD=4, L=2, qk_norm=True, seed=7,
                                    types={"norm": Q.BF16})),
        "qwen3moe": ("qwen3moe", dict(E=8, H=2, HKV=1, HD=8, qk_norm=True, tokenizer="bpe", seed=8,
                                      moe=(4, 2, 8))),
        "qwen3moe_q8_0": ("qwen3moe", dict(E=32, H=2, HKV=1, HD=16, L=2, qk_norm=True, seed=9, moe=(6, 3, 32),
                                           types={"exps": Q.Q8_0, "exps_down": Q.Q4_0})),
    }
    for name, (arch, kw) in seeds.items():
        put("model", f"valid_{name}", gguf_bytes(arch, model_fill(arch, **kw)))


# ---- chat ----------------------------------------------------------------------------------

NAMES = {"chatml": 0, "llama3": 1, "zephyr": 2, "llama2": 3}
RECOGNISE, GEN, FROM_GGUF = 7, 8, 16


def chat_input(flags, part, messages):
    body = messages if isinstance(messages, bytes) else json.dumps(messages).encode()
    return bytes([flags]) + two_part(part, body)


def chat_gguf(template, bos, eos):
    tokens = ["<unk>", bos or "<s>", eos or "</s>"]

    def fill(w):
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        if template is not None:
            w.add_chat_template(template)

    return gguf_bytes("llama", fill)


def write_chat_seeds():
    for fix in ("llama2", "llama3", "qwen2", "smollm2", "zephyr"):
        with open(os.path.join(FIX, "chat", fix + ".json")) as f:
            d = json.load(f)
        tpl = d["template"].encode()
        cases = d["cases"]
        for k in (2, 5):  # two and three messages, with and without the generation prompt
            c = cases[k]
            flags = RECOGNISE | (GEN if c["add_generation_prompt"] else 0)
            put("chat", f"valid_{fix}_text_{k}", chat_input(flags, tpl, c["messages"]))
        c = cases[6]
        put("chat", f"valid_{fix}_gguf",
            chat_input(RECOGNISE | GEN | FROM_GGUF, chat_gguf(d["template"], d["bos"], d["eos"]),
                       {"messages": c["messages"]}))
    convo = [{"role": "system", "content": "  Be terse.\n"}, {"role": "user", "content": "Hi \u00e9 \U0001F600"},
             {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "\tBye\t"}]
    for name, k in NAMES.items():
        put("chat", f"valid_named_{name}", chat_input(k | GEN, b"", convo))
        put("chat", f"valid_named_{name}_gguf", chat_input(k | FROM_GGUF, chat_gguf(None, "<s>", "</s>"),
                                                           convo[1:]))
    escapes = (b'[{"role":"user","content":"a\\u00e9b \\ud83d\\ude00 \\"q\\" \\\\u0000 \\/ \\n"},'
               b'{"role":"tool","content":"","extra":[1,2,{"x":null}]}]')
    put("chat", "valid_chatml_escapes", chat_input(NAMES["chatml"] | GEN, b"", escapes))
    put("chat", "valid_empty_messages", chat_input(NAMES["zephyr"] | GEN, b"", b'{"messages": []}'))
    put("chat", "valid_default_system",
        chat_input(RECOGNISE, b"{{ '<|im_start|>system\\nYou are kind.<|im_end|>\\n' }}<|im_start|>",
                   convo[1:2]))
    # Refusals: each stops at a different check.
    put("chat", "bad_llama31_template",
        chat_input(RECOGNISE, b"<|start_header_id|>Cutting Knowledge Date: Dec 2023", convo))
    put("chat", "bad_no_marker", chat_input(RECOGNISE, b"{{ messages }}", convo))
    put("chat", "bad_llama2_order", chat_input(NAMES["llama2"], b"", convo[2:]))
    put("chat", "bad_json", chat_input(NAMES["chatml"], b"", b'[{"role":"user","content":"x"'))
    put("chat", "bad_nul_escape", chat_input(NAMES["chatml"], b"", b'[{"role":"user","content":"a\\u0000b"}]'))
    put("chat", "bad_trailing_text", chat_input(NAMES["chatml"], b"", b'[] []'))
    put("chat", "bad_message_shape", chat_input(NAMES["chatml"], b"", b'[{"role":"user","content":7}]'))


def write_serve_seeds():
    """Request bodies, flags byte first (bit 0: chat, bit 1: /v1/embeddings). Valid ones fit fuzz_serve.c's
    context of 256 one-byte tokens; each bad one stops at a different check."""
    def body(chat, b):
        return bytes([1 if chat else 0]) + (b if isinstance(b, bytes) else json.dumps(b).encode())
    msgs = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi"}]
    valid = {
        "completion": (False, {"prompt": "Hello", "max_tokens": 8}),
        "completion_all": (False, {"model": "fuzz.gguf", "prompt": ["Once"], "max_tokens": 4, "temperature": 0.7,
                                   "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": -3, "stop": ["\n", "."],
                                   "presence_penalty": 0.5, "frequency_penalty": -0.5, "logit_bias": {"7": -100},
                                   "n": 3, "logprobs": 2, "stream": True, "stream_options": {"include_usage": True},
                                   "return_token_ids": True, "echo": False, "user": "ignored"}),
        "completion_ids": (False, {"prompt": [1, 2, 299], "max_tokens": None}),
        "completion_nested_ids": (False, {"prompt": [[5, 6]], "stop": "x"}),
        "chat": (True, {"messages": msgs, "max_tokens": 4}),
        "chat_parts": (True, {"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},
                                                                             {"type": "text", "text": "b"}]},
                                           {"role": "user", "content": None}],
                              "max_completion_tokens": 2, "logprobs": True, "top_logprobs": 5}),
        "chat_unicode": (True, b'{"messages":[{"role":"user","content":"\u00e9 \ud83d\ude00"}],"n":2}'),
    }
    for name, (chat, b) in valid.items():
        put("serve", f"valid_{name}", body(chat, b))
    bad = {
        "json": (False, b'{"prompt": "x",'),
        "not_object": (False, b"[1, 2]"),
        "model": (False, {"model": "gpt-4", "prompt": "x"}),
        "model_type": (False, {"model": 3, "prompt": "x"}),
        "no_prompt": (False, {"max_tokens": 3}),
        "token_id": (False, {"prompt": [300]}),
        "long_prompt": (False, {"prompt": "x" * 256}),
        "temperature": (False, {"prompt": "x", "temperature": "hot"}),
        "max_tokens": (False, {"prompt": "x", "max_tokens": 0}),
        "logit_bias": (False, {"prompt": "x", "logit_bias": {"abc": 1}}),
        "stop": (False, {"prompt": "x", "stop": [""]}),
        "too_many_stops": (False, {"prompt": "x", "stop": ["s"] * 17}),
        "echo": (False, {"prompt": "x", "echo": True}),
        "empty_messages": (True, {"messages": []}),
        "role": (True, {"messages": [{"role": "robot", "content": "x"}]}),
        "part": (True, {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
        "top_logprobs": (True, {"messages": msgs, "top_logprobs": 2}),
        "nul_prompt": (False, b'{"prompt": "a\\u0000b"}'),  # cJSON would cut the string at the NUL
        "nul_message": (True, b'{"messages": [{"role": "user", "content": "a\\u0000"}]}'),
    }
    for name, (chat, b) in bad.items():
        put("serve", f"bad_{name}", body(chat, b))
    # /v1/embeddings bodies: flags bit 1
    embed = {
        "valid_embed_text": {"input": "Hello", "model": "fuzz.gguf"},
        "valid_embed_list": {"input": ["a", "bc"], "encoding_format": "base64", "dimensions": 64},
        "valid_embed_ids": {"input": [[1, 2], [299]], "encoding_format": "float"},
        "bad_embed_empty": {"input": []},
        "bad_embed_token": {"input": [300]},
        "bad_embed_long": {"input": "x" * 257},
        "bad_embed_format": {"input": "x", "encoding_format": "int8"},
        "bad_embed_dimensions": {"input": "x", "dimensions": 32},
    }
    for name, b in embed.items():
        put("serve", name, bytes([2]) + json.dumps(b).encode())


def safetensors_bytes(entries, data, pad=True, raw_header=None):
    """A .safetensors image: u64 LE header length, the JSON header (space-padded
    to 8 bytes as the reference writer does), then `data`."""
    h = raw_header if raw_header is not None else json.dumps(entries, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write_safetensors_seeds():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((3, 4)).astype("<f4").tobytes()
    b = (rng.standard_normal(5).astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()  # bf16
    f16 = rng.standard_normal((2, 2)).astype("<f2").tobytes()
    ok = {"__metadata__": {"format": "pt"},
          "w": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]},
          "b": {"dtype": "BF16", "shape": [5], "data_offsets": [48, 58]},
          "h": {"dtype": "F16", "shape": [2, 2], "data_offsets": [58, 66]}}
    data = w + b + f16
    put("safetensors", "valid_three_dtypes", safetensors_bytes(ok, data))
    put("safetensors", "valid_unpadded", safetensors_bytes({"w": ok["w"]}, w, pad=False))
    put("safetensors", "valid_reordered", safetensors_bytes(
        {"b": {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]},
         "w": {"dtype": "F32", "shape": [1, 3, 4], "data_offsets": [10, 58]}}, b + w))
    full = safetensors_bytes(ok, data)
    put("safetensors", "bad_truncated_data", full[:-3])
    put("safetensors", "bad_truncated_header", full[:20])
    put("safetensors", "bad_short", b"\x10\x00\x00")
    put("safetensors", "bad_header_len_huge", struct.pack("<Q", 1 << 40) + b"{}")
    put("safetensors", "bad_not_json", safetensors_bytes(None, b"", raw_header=b"{\"w\": [1, 2"))
    put("safetensors", "bad_not_object", safetensors_bytes(None, b"", raw_header=b"[1, 2]  "))
    bad = dict(ok, w=dict(ok["w"], dtype="I32"))
    put("safetensors", "bad_dtype_i32", safetensors_bytes(bad, data))
    bad = dict(ok, w=dict(ok["w"], dtype="Q4"))
    put("safetensors", "bad_dtype_unknown", safetensors_bytes(bad, data))
    bad = dict(ok, b=dict(ok["b"], data_offsets=[40, 50]))
    put("safetensors", "bad_overlap", safetensors_bytes(bad, data))
    bad = dict(ok, w=dict(ok["w"], shape=[3, 5]))
    put("safetensors", "bad_size_mismatch", safetensors_bytes(bad, data))
    bad = dict(ok, w=dict(ok["w"], shape=[3, -4]))
    put("safetensors", "bad_negative_dim", safetensors_bytes(bad, data))
    bad = dict(ok, w=dict(ok["w"], shape=[1, 1, 1, 1, 12]))
    put("safetensors", "bad_rank5", safetensors_bytes(bad, data))
    bad = dict(ok, w=dict(ok["w"], data_offsets=[48, 0]))
    put("safetensors", "bad_offsets_reversed", safetensors_bytes(bad, data))
    dup = b'{"w":{"dtype":"F32","shape":[3,4],"data_offsets":[0,48]},' \
          b'"w":{"dtype":"F32","shape":[3,4],"data_offsets":[48,96]}}'
    put("safetensors", "bad_duplicate_name", safetensors_bytes(None, w + w, raw_header=dup))
    big = b'{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,48]}}'
    put("safetensors", "bad_shape_overflow", safetensors_bytes(None, w, raw_header=big))


def write_hf_seeds():
    def three(cfg, tok, tc):
        return two_part(cfg, two_part(tok, tc))

    def rd(name, f):
        with open(os.path.join(FIX, "hf", name, f), "rb") as fh:
            return fh.read()

    for name in ("llama_f32_sharded", "qwen2_bf16", "qwen3_f16"):
        put("hf", "valid_" + name, three(rd(name, "config.json"), rd(name, "tokenizer.json"),
                                          rd(name, "tokenizer_config.json")))
    cfg = json.loads(rd("qwen2_bf16", "config.json"))
    tok = json.loads(rd("qwen2_bf16", "tokenizer.json"))
    tc = rd("qwen2_bf16", "tokenizer_config.json")
    enc = lambda o: json.dumps(o).encode()
    put("hf", "bad_arch", three(enc(dict(cfg, architectures=["GemmaForCausalLM"])), enc(tok), tc))
    put("hf", "bad_no_layers", three(enc({k: v for k, v in cfg.items() if k != "num_hidden_layers"}), enc(tok), tc))
    put("hf", "bad_rope_yarn", three(enc(dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 4})), enc(tok), tc))
    put("hf", "bad_config_not_json", three(b"{\"architectures\": [", enc(tok), tc))
    put("hf", "bad_vocab_too_small", three(enc(dict(cfg, vocab_size=100)), enc(tok), tc))
    m = dict(tok["model"], byte_fallback=True)
    put("hf", "bad_byte_fallback", three(enc(cfg), enc(dict(tok, model=m)), tc))
    put("hf", "bad_pre_tokenizer", three(enc(cfg), enc(dict(tok, pre_tokenizer={"type": "Whitespace"})), tc))
    m = dict(tok["model"], merges=[[1, 2]])
    put("hf", "bad_merge_pair", three(enc(cfg), enc(dict(tok, model=m)), tc))
    # gemma3: the SentencePiece-style tokenizer.json and tokenizer_config.json's
    # added_tokens_decoder, the per-layer-kind config; and what is refused
    g = "gemma3_bf16"
    put("hf", "valid_" + g, three(rd(g, "config.json"), rd(g, "tokenizer.json"), rd(g, "tokenizer_config.json")))
    gcfg, gtok = json.loads(rd(g, "config.json")), json.loads(rd(g, "tokenizer.json"))
    gtc = json.loads(rd(g, "tokenizer_config.json"))
    put("hf", "bad_gemma3_multimodal", three(enc(dict(gcfg, architectures=["Gemma3ForConditionalGeneration"])),
                                             enc(gtok), enc(gtc)))
    put("hf", "bad_gemma3_attn_softcap", three(enc(dict(gcfg, attn_logit_softcapping=50.0)), enc(gtok), enc(gtc)))
    put("hf", "bad_gemma3_layer_types", three(enc(dict(gcfg, layer_types=["full_attention"] * 6)), enc(gtok),
                                              enc(gtc)))
    put("hf", "bad_gemma3_normalizer", three(enc(gcfg), enc(dict(gtok, normalizer={"type": "NFKC"})), enc(gtc)))
    put("hf", "bad_gemma3_added_decoder", three(enc(gcfg), enc(gtok), enc(dict(
        gtc, added_tokens_decoder={"x5": {"content": "<start_of_turn>", "special": True}}))))
    # qwen3moe: the expert keys; dense layers among MoE ones and missing expert counts are refused
    q = "qwen3moe_f32"
    put("hf", "valid_" + q, three(rd(q, "config.json"), rd(q, "tokenizer.json"), rd(q, "tokenizer_config.json")))
    qcfg = json.loads(rd(q, "config.json"))
    put("hf", "bad_qwen3moe_dense_layers", three(enc(dict(qcfg, mlp_only_layers=[1])), rd(q, "tokenizer.json"),
                                                 rd(q, "tokenizer_config.json")))
    # gpt-oss: the o200k Split pre-tokenizer, YaRN; refused: layers that do not alternate, truncated YaRN
    o = "gptoss_bf16"
    put("hf", "valid_" + o, three(rd(o, "config.json"), rd(o, "tokenizer.json"), rd(o, "tokenizer_config.json")))
    ocfg = json.loads(rd(o, "config.json"))
    put("hf", "bad_gptoss_layer_types", three(enc(dict(ocfg, layer_types=["full_attention"] * ocfg["num_hidden_layers"])),
                                              rd(o, "tokenizer.json"), rd(o, "tokenizer_config.json")))
    put("hf", "bad_gptoss_yarn_truncate", three(enc(dict(ocfg, rope_parameters=dict(ocfg["rope_parameters"], truncate=True))),
                                                rd(o, "tokenizer.json"), rd(o, "tokenizer_config.json")))
    put("hf", "bad_qwen3moe_no_experts", three(enc({k: v for k, v in qcfg.items() if k != "num_experts"}),
                                               rd(q, "tokenizer.json"), rd(q, "tokenizer_config.json")))


def write_grammar_seeds():
    """GBNF text, NUL, a string: valid_* parse and accept their string; bad_* are refused."""
    valid = {
        "yes_no": ('root ::= ("yes" | "no") "."', "yes."),
        "numbers": ('root ::= "[" num ("," num)* "]"\nnum ::= "-"? [0-9]+ # digits', "[1,-22,3]"),
        "json_ish": ('root ::= obj\nobj ::= "{" (pair ("," pair)*)? "}"\npair ::= str ":" val\n'
                     'val ::= str | [0-9]+ | obj\nstr ::= "\\"" [^"\\\\]* "\\""', '{"a":{"b":"c"},"d":1}'),
        "utf8": ('root ::= [а-я]+ "\\u00e9" "\\U0001F600"', "абвé\U0001F600"),
        "repeat": ('root ::= ("ab"){2,3} [x-z]{1,} "."?', "ababzz."),
        "dot_neg": ('root ::= . [^\\n]* "\\n"', "q rest\n"),
        "escapes": ('root ::= "\\x41\\t\\\\" [\\]\\-]', "A\t\\]"),
        "nested": ('root ::= ("(" root ")")*', "(()())"),
        "multiline": ('root ::=\n  a\n  | b\na ::= "1"\nb ::= "2"', "2"),
    }
    for name, (g, txt) in valid.items():
        put("grammar", "valid_" + name, g.encode() + b"\0" + txt.encode())
    bad = {
        "undefined": "root ::= foo", "left_rec": "root ::= root \"a\" | \"b\"", "no_root": "a ::= \"x\"",
        "unterminated": "root ::= \"abc", "bad_range": "root ::= [z-a]", "open_paren": "root ::= (\"a\"",
        "big_repeat": "root ::= \"a\"{5000}", "bad_escape": "root ::= \"\\q\"", "twice": "root ::= \"a\"\nroot ::= \"b\"",
        "empty_star": "root ::= (\"a\"?)*",
    }
    for name, g in bad.items():
        put("grammar", "bad_" + name, g.encode())


def write_json_schema_seeds():
    """Schema texts: valid_* convert (and their grammar parses); bad_* are refused."""
    valid = {
        "object": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 20},
                                                    "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
                   "required": ["name"], "additionalProperties": False},
        "enum": {"enum": ["a", 1, 2.5, None, True, [1, {"k": "v"}]]},
        "types": {"type": ["string", "null", "number", "boolean"], "nullable": True},
        "extra_keys": {"type": "object", "properties": {"ab": {}, "abc": {}, "é": {}}, "additionalProperties": {"type": "integer"}},
        "refs": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}},
                                 "required": ["v", "next"]}}, "$ref": "#/$defs/n"},
        "oneof": {"oneOf": [{"type": "object", "properties": {"t": {"const": "a"}}, "required": ["t"]},
                            {"type": "object", "properties": {"t": {"const": "b"}}, "required": ["t"]}, {"type": "string"}]},
        "tuple": {"type": "array", "prefixItems": [{"type": "integer"}, {"const": "x"}], "items": {"type": "boolean"}, "minItems": 3, "maxItems": 5},
        "formats": {"type": "array", "items": {"anyOf": [{"type": "string", "format": f} for f in ("date", "time", "date-time", "uuid", "ipv4")]}},
        "any_object": {"type": "object"},
        "any_value": {},
        "draft7": {"definitions": {"s": {"type": "string"}}, "type": "array", "items": [{"$ref": "#/definitions/s"}], "additionalItems": False},
    }
    for name, schema in valid.items():
        put("json_schema", "valid_" + name, json.dumps(schema).encode())
    bad = {
        "minimum": {"type": "integer", "minimum": 1}, "pattern": {"type": "string", "pattern": "a+"},
        "oneof_overlap": {"oneOf": [{"type": "integer"}, {"type": "number"}]}, "left_rec": {"anyOf": [{"$ref": "#"}, {}]},
        "remote_ref": {"$ref": "other.json#/a"}, "missing_ref": {"$ref": "#/$defs/nope"}, "typo": {"tpye": "string"},
        "big_count": {"type": "string", "maxLength": 100000}, "big_int": {"const": 2**60}, "false": False,
    }
    for name, schema in bad.items():
        put("json_schema", "bad_" + name, json.dumps(schema).encode())
    put("json_schema", "bad_json", b'{"type": ')
    put("json_schema", "bad_nul", b'{"const": "a\\u0000"}'.replace(b"\\\\", b"\\"))
    put("json_schema", "bad_deep", b'{"items":' * 40 + b"{}" + b"}" * 40)


if __name__ == "__main__":
    write_gguf_seed("valid_ggufpy_tensors", "llama", True)
    write_gguf_seed("valid_ggufpy_meta_only", "qwen2", False)
    write_tokenizer_seeds()
    write_model_seeds()
    write_chat_seeds()
    write_serve_seeds()
    write_safetensors_seeds()
    write_hf_seeds()
    write_grammar_seeds()
    write_json_schema_seeds()
