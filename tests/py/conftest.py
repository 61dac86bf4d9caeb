"""Shared pytest fixtures.

codec_lib: the shared library (ctypes) with llmk_quantize_row /
llmk_dequantize_row typed; $LLMK_LIB, else libllmk.so next to $LLMK_BIN
(default build/llmk). Skips when it is not built."""
import ctypes
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def codec_lib():
    binp = pathlib.Path(os.environ.get("LLMK_BIN", ROOT / "build" / "llmk"))
    path = pathlib.Path(os.environ.get("LLMK_LIB", binp.parent / "libllmk.so"))
    if not path.exists():
        pytest.skip(f"{path} not built")
    L = ctypes.CDLL(str(path))
    for f in (L.llmk_dequantize_row, L.llmk_quantize_row):
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return L


def pytest_configure(config):
    # `make test` runs -m "not slow"; `make test-slow` runs -m slow (scripts/run_tests.sh).
    config.addinivalue_line("markers", "slow: long end-to-end runs, left to `make test-slow` (scripts/run_tests.sh)")
