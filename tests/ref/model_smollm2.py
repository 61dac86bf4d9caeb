"""SmolLM2 reference fixtures: transformers' own GGUF loading of the default model.

Weights are the dequantized GGUF (transformers dequantizes through gguf-py), so
the reference sees exactly the numbers llmk reads from the file. Everything is
run in float32 with eager attention, which is what the fixtures hold; the same
prompts are also run in float64 to record how far fp32 itself is from exact
arithmetic (the floor under the tolerance the tests can ask of llmk).
"""
import hashlib
import json
import os

import numpy as np

MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Short on purpose: a full-vocab f32 logit row is 196 KB, and every position
# of every prompt is stored. Each prompt exercises a tokenizer corner.
PROMPTS = [
    ("english", "The capital of France is"),
    ("code", "def fib(n):\n    return n if n<2"),
    ("french_german", "Le café coûte 3€; Straße"),
    ("cjk_cyrillic", "你好，世界! Привет"),
    ("emoji", "Hi 🍕🚀 👩\u200d💻"),
    ("digits", "Pi=3.14159, 2024"),
    ("whitespace", "a  b   c\n\n\nd\t\te    \n  end"),
    ("chat", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"),
    ("contractions", "I'm sure they'll say you've DONE it"),
]
MAX_PROMPT_TOKENS = 16
N_GREEDY = 64


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_meta(path):
    import gguf

    r = gguf.GGUFReader(path)
    out = {}
    for k in ("tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
              "tokenizer.ggml.model", "tokenizer.ggml.pre"):
        if k in r.fields:
            v = r.fields[k].contents()
            out[k] = v.item() if hasattr(v, "item") else v
    return out


def greedy_margins(logits_rows, ids):
    """For each row, (argmax, top1 - top2, top1 - logit of ids[i])."""
    out = []
    for row, t in zip(logits_rows, ids):
        top2 = np.partition(row, -2)[-2:]
        out.append((int(np.argmax(row)), float(top2[1] - top2[0]), float(row.max() - row[t])))
    return out


def make(model_dir, out_dir):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    path = os.path.join(model_dir, MODEL_NAME)
    meta = gguf_meta(path)
    tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=MODEL_NAME)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, gguf_file=MODEL_NAME, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    eos = int(meta["tokenizer.ggml.eos_token_id"])
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
    bos = int(meta["tokenizer.ggml.bos_token_id"])

    encoded = {}
    for name, text in PROMPTS:
        # transformers' tokenizer: special tokens in the text are parsed
        # (the chat prompt's <|im_start|> becomes one id); the GGUF says
        # add_bos_token = false and the tokenizer follows it. Assert both.
        ids = tok.encode(text, add_special_tokens=True)
        plain = tok.encode(text, add_special_tokens=False)
        assert ids == plain or (add_bos and ids == [bos] + plain), (name, ids, plain)
        assert len(ids) <= MAX_PROMPT_TOKENS, (name, len(ids), ids)
        assert tok.decode(ids) == text, (name, tok.decode(ids))
        encoded[name] = ids

    model64 = None
    records, arrays = [], {}
    for name, text in PROMPTS:
        ids = encoded[name]
        has_special = any(s in text for s in tok.all_special_tokens)

        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0].float().numpy()
            gen = model.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=N_GREEDY,
                do_sample=False, num_beams=1, repetition_penalty=1.0,
                temperature=None, top_p=None, top_k=None,
                eos_token_id=eos, pad_token_id=eos)
        cont = gen[0, len(ids):].tolist()
        stopped = bool(cont) and cont[-1] == eos
        if stopped:
            assert len(cont) <= N_GREEDY
        else:
            assert len(cont) == N_GREEDY, (name, len(cont))

        # Cross-check generate() against teacher-forced argmax of the whole
        # sequence, and record how close each greedy choice was to a tie.
        full = torch.tensor([ids + cont])
        with torch.no_grad():
            tf = model(full).logits[0].float().numpy()
        steps = greedy_margins(tf[len(ids) - 1:len(ids) - 1 + len(cont)], cont)
        tf_agree = all(a == t for (a, _, _), t in zip(steps, cont))

        if model64 is None:
            model64 = AutoModelForCausalLM.from_pretrained(
                model_dir, gguf_file=MODEL_NAME, dtype=torch.float32,
                attn_implementation="eager").double().eval()
        with torch.no_grad():
            l64 = model64(x).logits[0].numpy()
        rel = [float(np.linalg.norm(logits[i] - l64[i]) / np.linalg.norm(l64[i]))
               for i in range(len(ids))]

        arrays[name] = logits.astype("<f4")
        records.append({
            "name": name,
            "text": text,
            "ids": ids,
            "special": has_special,
            "continuation": cont,
            "stopped_at_eos": stopped,
            "greedy_min_margin": min(m for _, m, _ in steps),
            "greedy_matches_teacher_forced_argmax": tf_agree,
            "fp32_vs_fp64_rel_l2_max": max(rel),
        })
        print(f"{name}: {len(ids)} ids, {len(cont)} generated, stop={stopped}, "
              f"min margin {records[-1]['greedy_min_margin']:.4f}, "
              f"fp32-vs-fp64 {max(rel):.2e}, tf agree {tf_agree}", flush=True)

    os.makedirs(out_dir, exist_ok=True)
    np.savez_compressed(os.path.join(out_dir, "smollm2_logits.npz"), **arrays)
    doc = {
        "model": MODEL_NAME,
        "model_sha256": sha256_file(path),
        "n_vocab": int(arrays[PROMPTS[0][0]].shape[1]),
        "add_bos": add_bos,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "gguf_tokenizer_meta": meta,
        "n_greedy": N_GREEDY,
        "greedy": "transformers generate(), do_sample=False, repetition_penalty=1.0; "
                  "stops at eos_token_id (the stop token is included in continuation)",
        "tokenizer": "transformers AutoTokenizer from the GGUF; special tokens in text are parsed; "
                     "encode(add_special_tokens=True) (adds nothing: add_bos_token is false)",
        "logits": "smollm2_logits.npz: one float32 array [n_ids, n_vocab] per prompt name, "
                  "teacher-forced fp32 eager forward of the prompt ids",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "numpy": np.__version__},
        "prompts": records,
    }
    with open(os.path.join(out_dir, "smollm2.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
