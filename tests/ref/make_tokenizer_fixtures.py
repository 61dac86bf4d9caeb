#!/usr/bin/env python3
"""Write the tokenizer fixtures under tests/fixtures/tokenizer/.

Run with a venv that has `tokenizers`, `sentencepiece`, `gguf` (and, for the
cross-check only, `transformers`):

    /tmp/refvenv/bin/python tests/ref/make_tokenizer_fixtures.py [MODEL.gguf]

Every expected id comes from a reference tokenizer that shares no code with
llmk:

* smollm2.json: a Hugging Face `tokenizers` BPE built from the default model
  file's own vocabulary and merges, with SmolLM2's pre-tokenizer as its
  tokenizer.json defines it (Digits(individual_digits) then ByteLevel without a
  prefix space) and its control tokens as special added tokens. transformers'
  GGUF loader is run too, as a cross-check of the "--special" cases; it drops
  the Digits step (the GGUF's "smollm" pre name is not mapped), which shows up
  only when whitespace runs end right before a digit, so those disagreements
  are counted and printed, not used.
* tiny_llama_bpe / tiny_qwen2: byte-level BPE tokenizers trained here on a
  fixed text with Llama 3's and Qwen2's pre-tokenizer regexes (from their
  tokenizer.json), written as tokenizer-only GGUF files with gguf-py.
* tiny_spm: a SentencePiece BPE model (byte fallback, identity normalisation,
  dummy prefix — Llama 2's settings) trained here, written as a GGUF with
  scores and token types; expected ids from sentencepiece itself.
"""
import json
import os
import sys
import tempfile

import gguf
import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "tokenizer")
DEFAULT_MODEL = os.path.join(os.environ.get("LLMK_MODELS", os.path.expanduser("~/.cache/llmk")),
                             "SmolLM2-135M-Instruct.Q4_1.gguf")

# Pre-tokenizer regexes exactly as the models' tokenizer.json files give them.
RE_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
RE_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The texts every tokenizer is checked on. (text, parse_special)
TEXTS = [
    ("", False),
    ("Hello world", False),
    ("Hello, world! How are you today?", False),
    (" leading space", False),
    ("trailing space ", False),
    ("  two leading and two trailing  ", False),
    ("a  1 b   22 c\t3", False),
    ("runs    of     spaces\t\ttabs\n\nnewlines\n\n\n  indented\r\nCRLF", False),
    ("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n", False),
    ("for (int i = 0; i < n; i++) { x[i] = y[i] * 2.5f; } // C code\n", False),
    ("I'm sure they'll say it's fine, don't you think? We've seen it. I'D SAY SHE'S RIGHT", False),
    ("Café naïve résumé façade Ångström Ærøskøbing São Paulo", False),
    ("Numbers: 0 7 42 1234 3.14159 1,000,000 and 123456789012345678901234567890", False),
    ("你好，世界！这是一个测试。日本語のテキストとカタカナ。한국어 텍스트", False),
    ("مرحبا بالعالم، كيف حالك اليوم؟", False),
    ("Привет, мир! Ελληνικά κείμενα. עברית", False),
    ("Emoji: 😀👍🏽🇺🇸 ❤️ family 👨‍👩‍👧‍👦 and 🏳️‍🌈 done", False),
    ("Mixed: x²+y²=z², ½ ¾, ① ② ③, ٣٤٥ Arabic digits, ४२ Devanagari", False),
    ("odd spaces:\u00a0nbsp\u2003em\u3000ideographic\u0085nel\u200bzwsp end", False),
    ("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", False),
    ("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", True),
    ("text<|endoftext|>more <|im_end|>", True),
    ("<|im_start|><|im_start|>x", True),
    ("<|im_start partial <| im_end|> <|im_end", True),
    ("nel\u0085\u0085!x \u0085 y\u0085\u0085", False),
    ("mongolian\u180e\u180e!x a\u180e b\u180e \u180e", False),
    ("   ", False),
    ("\n", False),
    ("a\u0301 combining e\u0301 and precomposed é", False),
    ("URL https://example.com/path?q=1&r=two#frag and email a.b@c.de", False),
]

TRAIN_TEXT = """The quick brown fox jumps over the lazy dog. I'm sure they'll say it's fine.
def add(a, b):
    return a + b

for (int i = 0; i < 10; i++) { printf("%d\\n", i); }
Numbers like 2024, 3.14159 and 1,000,000 appear often in text.
Café, naïve, résumé: accented Latin is common in European languages.
你好世界，这是一个测试。日本語のテキスト。
مرحبا بالعالم
Привет мир! Hello world! Hello again, world.
    indented    with    spaces
\ttabs\tand\nnewlines\r\n
The model tokenizes text into pieces; the pieces become ids.
""" * 3


def train_bytelevel(regex, specials, user_tokens, vocab_size, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(TRAIN_TEXT.split("\n"), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in user_tokens])
    return tok


def bytelevel_gguf_data(tok):
    """tokens, types, merges of a trained `tokenizers` BPE, in id order."""
    j = json.loads(tok.to_str())
    vocab = dict(j["model"]["vocab"])
    types = {}
    for a in j["added_tokens"]:
        vocab[a["content"]] = a["id"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    assert all(t is not None for t in tokens)
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    return tokens, [int(types.get(i, gguf.TokenType.NORMAL)) for i in range(n)], merges


def write_gguf(path, model, pre, tokens, types, merges=None, scores=None, bos=None, eos=None,
               eot=None, unk=None, add_bos=None):
    w = gguf.GGUFWriter(path, "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if merges is not None:
        w.add_token_merges(merges)
    if scores is not None:
        w.add_token_scores(scores)
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if eot is not None:
        w.add_eot_token_id(eot)
    if unk is not None:
        w.add_unk_token_id(unk)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def case_bytelevel(tok, text, special, bos_prefix):
    tok.encode_special_tokens = not special
    enc = tok.encode(text, add_special_tokens=False)
    tok.encode_special_tokens = False
    ids = bos_prefix + enc.ids
    return {"text": text, "special": special, "ids": ids,
            "pieces": ([tok.id_to_token(i) for i in bos_prefix]) + enc.tokens,
            "decoded": tok.decode(ids, skip_special_tokens=True)}


def smollm2(model_path):
    r = gguf.GGUFReader(model_path)
    f = r.fields
    tokens = [str(bytes(f["tokenizer.ggml.tokens"].parts[i]), "utf-8")
              for i in f["tokenizer.ggml.tokens"].data]
    merges = [str(bytes(f["tokenizer.ggml.merges"].parts[i]), "utf-8")
              for i in f["tokenizer.ggml.merges"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0])
             for i in f["tokenizer.ggml.token_type"].data]
    pre = str(bytes(f["tokenizer.ggml.pre"].parts[-1]), "utf-8")
    assert pre == "smollm", pre
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    cases = [case_bytelevel(tok, t, s, []) for t, s in TEXTS]

    # Cross-check: transformers' own GGUF tokenizer on the same file.
    try:
        from transformers import AutoTokenizer
        d = tempfile.mkdtemp()
        os.symlink(os.path.abspath(model_path), os.path.join(d, "m.gguf"))
        hf = AutoTokenizer.from_pretrained(d, gguf_file="m.gguf")
        same = sum(hf.encode(c["text"], add_special_tokens=False,
                             split_special_tokens=not c["special"]) == c["ids"] for c in cases)
        print(f"smollm2: transformers' GGUF tokenizer agrees on {same}/{len(cases)} texts "
              "(it lacks the Digits pre-tokenizer step)")
    except Exception as e:  # the fixtures do not depend on it
        print("smollm2: transformers cross-check skipped:", e)
    return {"model": "default", "pre": pre, "add_bos": False, "byte_level": True,
            "cases": cases}


def tiny_bytelevel(name, regex, pre, ignore_merges, specials, user, bos, eos, eot, add_bos):
    tok = train_bytelevel(regex, specials, user, 700, ignore_merges)
    tokens, types, merges = bytelevel_gguf_data(tok)
    path = os.path.join(OUT, name + ".gguf")
    ids = {t: tokens.index(t) for t in (bos, eos, eot) if t}
    write_gguf(path, "gpt2", pre, tokens, types, merges=merges,
               bos=ids.get(bos), eos=ids.get(eos), eot=ids.get(eot), add_bos=add_bos)
    texts = TEXTS + [(t.replace("<|im_start|>", specials[0]).replace("<|im_end|>", specials[-1]), s)
                     for t, s in TEXTS if "<|" in t]
    texts += [(f"think {user[0]} about it{user[0]}x", False)] if user else []
    prefix = [ids[bos]] if add_bos else []
    cases = [case_bytelevel(tok, t, s, prefix) for t, s in texts]
    return {"model": name + ".gguf", "pre": pre, "add_bos": add_bos, "byte_level": True,
            "cases": cases}


def tiny_spm():
    import sentencepiece as spm
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "train.txt"), "w") as fh:
        fh.write(TRAIN_TEXT)
    prefix = os.path.join(d, "sp")
    spm.SentencePieceTrainer.train(
        input=os.path.join(d, "train.txt"), model_prefix=prefix, model_type="bpe",
        vocab_size=600, byte_fallback=True, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, split_digits=True, num_threads=1,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [float(sp.get_score(i)) for i in range(n)]
    types = []
    for i in range(n):
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.NORMAL)
    path = os.path.join(OUT, "tiny_spm.gguf")
    write_gguf(path, "llama", None, tokens, [int(t) for t in types], scores=scores,
               bos=1, eos=2, unk=0, add_bos=True)
    cases = []
    for text, special in TEXTS:
        if special:
            continue  # sentencepiece has no notion of special-token text
        ids = [1] + sp.encode(text)
        cases.append({"text": text, "special": False, "ids": ids,
                      "pieces": [sp.id_to_piece(i) for i in ids],
                      "decoded": sp.decode(ids)})
    return {"model": "tiny_spm.gguf", "pre": None, "add_bos": True, "byte_level": False,
            "cases": cases}


def main():
    os.makedirs(OUT, exist_ok=True)
    model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    sets = {
        "smollm2": smollm2(model),
        "tiny_llama_bpe": tiny_bytelevel(
            "tiny_llama_bpe", RE_LLAMA3, "llama-bpe", True,
            ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|eot_id|>"], [],
            "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", True),
        "tiny_qwen2": tiny_bytelevel(
            "tiny_qwen2", RE_QWEN2, "qwen2", False,
            ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], ["<think>"],
            None, "<|im_end|>", None, False),
        "tiny_spm": tiny_spm(),
    }
    for name, data in sets.items():
        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.write("\n")
        print(f"{name}: {len(data['cases'])} cases")


if __name__ == "__main__":
    main()
