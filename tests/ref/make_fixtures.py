#!/usr/bin/env python3
"""Write the model-level reference fixtures under tests/fixtures/model/.

Run with a venv that has torch, transformers, tokenizers, gguf and accelerate
(not the test venv):

    /tmp/refvenv/bin/python tests/ref/make_fixtures.py            # everything
    /tmp/refvenv/bin/python tests/ref/make_fixtures.py smollm2    # one part
    /tmp/refvenv/bin/python tests/ref/make_fixtures.py tiny
    /tmp/refvenv/bin/python tests/ref/make_fixtures.py moe   # qwen3moe (needs pip to reach PyPI)
    /tmp/refvenv/bin/python tests/ref/make_fixtures.py gemma3   # gemma3 (needs pip to reach PyPI)
    /tmp/refvenv/bin/python tests/ref/make_fixtures.py gptoss   # gpt-oss (needs pip to reach PyPI)

docs/testing.md describes each fixture and the tolerances the tests use.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts", nargs="*", default=["smollm2", "tiny", "moe", "gemma3", "gptoss"],
                    choices=["smollm2", "tiny", "moe", "gemma3", "gptoss"])
    ap.add_argument("--models", default=os.environ.get("LLMK_MODELS", os.path.expanduser("~/.cache/llmk")),
                    help="directory holding SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "model"))
    args = ap.parse_args()
    if "tiny" in args.parts:
        import model_tiny
        model_tiny.make(args.out)
    if "moe" in args.parts:
        import model_moe
        model_moe.make(args.out)
    if "gemma3" in args.parts:
        import model_gemma3
        model_gemma3.make(args.out)
    if "gptoss" in args.parts:
        import model_gptoss
        model_gptoss.make(args.out)
    if "smollm2" in args.parts:
        import model_smollm2
        model_smollm2.make(args.models, args.out)


if __name__ == "__main__":
    main()
