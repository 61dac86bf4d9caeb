"""Write the gguf-py-made seeds of the GGUF fuzz corpus (fuzz/corpus/gguf/valid_ggufpy_*).

The other seeds come from `test_gguf --write-corpus fuzz/corpus/gguf`. These are
written by an independent implementation (PyPI gguf) so the corpus replay also
checks that llmk opens files it did not write itself.
Run: .venv/bin/python fuzz/make_seeds.py
"""
import os

import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType

OUT = os.path.join(os.path.dirname(__file__), "corpus", "gguf")


def write(path, arch, with_tensors):
    w = GGUFWriter(path, arch)
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
        w.add_tensor("blk.0.attn_q.weight", q, raw_dtype=GGMLQuantizationType.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    write(os.path.join(OUT, "valid_ggufpy_tensors"), "llama", True)
    write(os.path.join(OUT, "valid_ggufpy_meta_only"), "qwen2", False)
