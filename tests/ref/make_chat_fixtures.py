#!/usr/bin/env python3
"""Render chat conversations with jinja2, the way transformers'
apply_chat_template does, and write tests/fixtures/chat/*.json.

Run with a venv that has jinja2, gguf and transformers:
    /tmp/refvenv/bin/python tests/ref/make_chat_fixtures.py [MODEL.gguf]

The default model's template is read from the GGUF itself
(tokenizer.chat_template) and its token ids come from transformers'
tokenizer built from the same file. The other families' templates are the
published template strings of models that use them (Llama-3-Instruct,
TinyLlama-Chat / Zephyr, Llama-2-chat, Qwen2-Instruct, Gemma-3-it — the
latter kept in model_gemma3.py, which puts it in the tiny gemma3 GGUF —
and gpt-oss's harmony template, read from the tiny gpt-oss GGUF, where
model_gptoss.py's conversion put it); each fixture carries
the template text, bos and eos, so the test can build a tiny GGUF that holds
just that metadata and check that llmk recognises and renders it.
"""
import json
import os
import sys

import jinja2.sandbox
from gguf import GGUFReader

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = os.path.join(HERE, "..", "fixtures", "chat")
MODEL = os.path.expanduser(
    sys.argv[1] if len(sys.argv) > 1 else
    os.path.join(os.environ.get("LLMK_MODELS", "~/.cache/llmk"), "SmolLM2-135M-Instruct.Q4_1.gguf"))

LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
          "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
          "{% endif %}")

ZEPHYR = ("{% for message in messages %}\n{% if message['role'] == 'user' %}\n"
          "{{ '<|user|>\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'system' %}\n"
          "{{ '<|system|>\n' + message['content'] + eos_token }}\n"
          "{% elif message['role'] == 'assistant' %}\n"
          "{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
          "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
          "{% endfor %}")

LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
          "{% set system_message = messages[0]['content'] %}{% else %}"
          "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
          "{% for message in loop_messages %}"
          "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
          "{% endif %}{% if loop.index0 == 0 and system_message != false %}"
          "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
          "{% else %}{% set content = message['content'] %}{% endif %}"
          "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
          "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
          "{% endif %}{% endfor %}")

QWEN2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
         "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
         "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

CONVERSATIONS = [
    [{"role": "user", "content": "Hi there"}],
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "What is the capital of France?"}],
    [{"role": "user", "content": "Name a color."},
     {"role": "assistant", "content": "Blue."},
     {"role": "user", "content": "Another one?"}],
    [{"role": "system", "content": "Answer in French."},
     {"role": "user", "content": "Hello"},
     {"role": "assistant", "content": "Bonjour !"},
     {"role": "user", "content": "  How are you?\n"}],
    [{"role": "user", "content": "Unicode: héllo wörld — 日本語 🙂\nsecond line"}],
]

# What only Gemma's template does: the system text is not trimmed (the
# content is), a lone system message gives no turn, and a role other than
# user at an odd place passes through under its own name.
GEMMA_EXTRA = [
    [{"role": "system", "content": "  Be brief.\n"},
     {"role": "user", "content": "\tHi "},
     {"role": "assistant", "content": " Hello!\n\n"},
     {"role": "user", "content": "Bye"}],
    [{"role": "system", "content": "Only a system message."}],
    [{"role": "user", "content": "Run it."},
     {"role": "tool", "content": "{\"ok\": true}"}],
]


def render(template, messages, add_gen, bos, eos):
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_gen,
                                            bos_token=bos, eos_token=eos)


def field_str(r, key):
    f = r.fields[key]
    return bytes(f.parts[f.data[0]]).decode("utf-8")


def token_text(r, id_key):
    f = r.fields[id_key]
    tid = int(f.parts[f.data[0]][0])
    toks = r.fields["tokenizer.ggml.tokens"]
    return bytes(toks.parts[toks.data[tid]]).decode("utf-8")


def write(name, family, template, bos, eos, tokenizer=None, extra=()):
    cases = []
    for conv in CONVERSATIONS + list(extra):
        for gen in (True, False):
            text = render(template, conv, gen, bos, eos)
            case = {"messages": conv, "add_generation_prompt": gen, "rendered": text}
            if tokenizer is not None:
                case["ids"] = tokenizer.encode(text, add_special_tokens=False)
            cases.append(case)
    doc = {"family": family, "template": template, "bos": bos, "eos": eos, "cases": cases}
    path = os.path.join(OUT, name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path, len(cases), "cases")


# Harmony (gpt-oss): what its template does beyond the common cases — a
# developer message, an empty leading system message (no developer turn), a
# last assistant turn (<|return|> without the generation prompt), roles it
# skips; and what it refuses (kept with the error, rendered by nobody).
HARMONY_EXTRA = [
    [{"role": "developer", "content": "Reply in haiku."},
     {"role": "user", "content": "Rain?"}],
    [{"role": "system", "content": ""},
     {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Name a color."},
     {"role": "assistant", "content": "Blue."}],
    [{"role": "user", "content": "a"},
     {"role": "system", "content": "late system: the template drops it"},
     {"role": "developer", "content": "late developer: dropped too"},
     {"role": "assistant", "content": "b"},
     {"role": "user", "content": "c"}],
]
HARMONY_REFUSED = [
    [],  # messages[0] is undefined
    [{"role": "user", "content": "Run it."},
     {"role": "tool", "content": "{\"ok\": true}"}],
    [{"role": "user", "content": "x"},
     {"role": "assistant", "content": "<|channel|>final<|message|>y"}],
]


def write_harmony(gguf_path):
    """The fixture's date is model_gptoss.FIXED_DATE (strftime_now fixed)."""
    import jinja2.exceptions
    from model_gptoss import FIXED_DATE, render as render_harmony

    template = field_str(GGUFReader(gguf_path), "tokenizer.chat_template")
    cases = []
    for conv in CONVERSATIONS + HARMONY_EXTRA:
        for gen in (True, False):
            cases.append({"messages": conv, "add_generation_prompt": gen,
                          "rendered": render_harmony(template, conv, gen)})
    for effort in ("low", "high"):  # chat_template_kwargs the template reads
        conv = CONVERSATIONS[0]
        cases.append({"messages": conv, "add_generation_prompt": True, "kwargs": {"reasoning_effort": effort},
                      "rendered": render_harmony(template, conv, True, reasoning_effort=effort)})
    refused = []
    for conv in HARMONY_REFUSED:
        try:
            render_harmony(template, conv, True)
        except jinja2.exceptions.TemplateError as e:
            refused.append({"messages": conv, "error": str(e)[:200]})
        else:
            raise AssertionError(conv)
    doc = {"family": "harmony", "template": template, "bos": "<|startoftext|>", "eos": "<|return|>",
           "date": FIXED_DATE, "cases": cases, "refused": refused}
    path = os.path.join(OUT, "gptoss.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote", path, len(cases), "cases")


def main():
    os.makedirs(OUT, exist_ok=True)
    r = GGUFReader(MODEL)
    smol = field_str(r, "tokenizer.chat_template")
    bos = token_text(r, "tokenizer.ggml.bos_token_id")
    eos = token_text(r, "tokenizer.ggml.eos_token_id")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.dirname(MODEL), gguf_file=os.path.basename(MODEL))
    write("smollm2", "chatml", smol, bos, eos, tok)
    write("qwen2", "chatml", QWEN2, "", "<|im_end|>")
    write("llama3", "llama3", LLAMA3, "<|begin_of_text|>", "<|eot_id|>")
    write("zephyr", "zephyr", ZEPHYR, "<s>", "</s>")
    # Llama-2 needs alternating roles; the fixture keeps the conversations
    # the template accepts (all of the above do).
    write("llama2", "llama2", LLAMA2, "<s>", "</s>")
    # Gemma 3 also requires alternating roles and folds the system message
    # into the first user turn.
    from model_gemma3 import GEMMA3_TEMPLATE
    write("gemma3", "gemma", GEMMA3_TEMPLATE, "<bos>", "<eos>", extra=GEMMA_EXTRA)
    write_harmony(os.path.join(HERE, "..", "fixtures", "model", "tiny", "tiny_gptoss.gguf"))


if __name__ == "__main__":
    main()
