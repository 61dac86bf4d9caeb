"""`llmk info` against gguf-py (an independent GGUF reader), and hostile files.

Every tensor info and metadata value that `llmk info --json` reports is
compared with gguf.GGUFReader on the default model and on a file gguf-py
writes here. Malformed files must give a status name, a message and exit
code 1 from both the normal and the sanitizer build (LLMK_SAN_BIN, skipped
when absent), with no sanitizer report.
"""
import json
import math
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, LlamaFileType

ROOT = Path(__file__).resolve().parents[2]
LLMK = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
LLMK_SAN = os.environ.get("LLMK_SAN_BIN", str(ROOT / "build" / "san" / "llmk"))
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / "SmolLM2-135M-Instruct.Q4_1.gguf"

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "str",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def run(binary, *args, env=None):
    e = dict(os.environ)
    e.update({"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=99",
              "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=98"})
    if env:
        e.update(env)
    return subprocess.run([binary, *map(str, args)], capture_output=True, timeout=120, env=e)


def binaries():
    out = [pytest.param(LLMK, id="llmk")]
    out.append(pytest.param(LLMK_SAN, id="san", marks=pytest.mark.skipif(
        not os.access(LLMK_SAN, os.X_OK), reason="no sanitizer build")))
    return out


def info_json(binary, path):
    r = run(binary, "info", "--json", path)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def same_number(got, want, vtype):
    if isinstance(got, str):  # integers beyond 2^53 as exact decimal strings; nan, inf
        if vtype in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
            return float(got) == float(want) or (math.isnan(float(got)) and math.isnan(float(want)))
        return int(got) == int(want)
    if vtype == GGUFValueType.BOOL:
        return got is bool(want)
    if vtype == GGUFValueType.FLOAT32:
        return got == float(np.float32(want)) or (math.isnan(got) and math.isnan(want))
    return got == want


def compare_with_gguf_py(doc, path, r=None):
    r = r or GGUFReader(path)
    assert doc["version"] == r.fields["GGUF.version"].contents()
    assert doc["alignment"] == r.alignment
    assert doc["data_offset"] == r.data_offset
    assert doc["file_size"] == os.path.getsize(path)
    # tensors, in file order
    assert len(doc["tensors"]) == len(r.tensors)
    for mine, ref in zip(doc["tensors"], r.tensors):
        assert mine["name"] == ref.name
        assert mine["type_id"] == int(ref.tensor_type)
        assert mine["type"].upper() == GGMLQuantizationType(ref.tensor_type).name
        assert mine["shape"] == [int(x) for x in ref.shape]
        assert mine["n_elements"] == int(ref.n_elements)
        assert mine["n_bytes"] == int(ref.n_bytes)
        assert doc["data_offset"] + mine["offset"] == ref.data_offset
    # metadata: same keys in the same order, same types and values
    ref_keys = [k for k in r.fields if not k.startswith("GGUF.")]
    assert doc["key_order"] == ref_keys
    checked = 0
    for key in ref_keys:
        f, mine = r.fields[key], doc["metadata"][key]
        assert mine["type"] == TYPE_NAMES[f.types[0]], key
        want = f.contents()
        if f.types[0] == GGUFValueType.ARRAY:
            assert mine["elem_type"] == TYPE_NAMES[f.types[1]], key
            if f.types[1] == GGUFValueType.ARRAY:
                assert mine["count"] == int(f.parts[4][0]), key  # outer count (data is flattened)
                continue
            assert mine["count"] == len(want), key
            if f.types[1] == GGUFValueType.STRING:
                assert mine["value"] == want, key
            else:
                assert all(same_number(g, w, f.types[1]) for g, w in zip(mine["value"], want)), key
        elif f.types[0] == GGUFValueType.STRING:
            assert mine["value"] == want, key
        else:
            assert same_number(mine["value"], want, f.types[0]), (key, mine["value"], want)
        checked += 1
    return checked


def write_varied(path):
    """A small file from gguf-py with every value type and a few tensor types."""
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(3)
    w.add_uint8("t.u8", 250)
    w.add_int8("t.i8", -128)
    w.add_uint16("t.u16", 65535)
    w.add_int16("t.i16", -32768)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2147483648)
    w.add_float32("t.f32", 0.1)
    w.add_bool("t.bool", False)
    w.add_string("t.str", "naïve ☃ text")
    w.add_uint64("t.u64", 2**64 - 1)
    w.add_int64("t.i64", -(2**63))
    w.add_float64("t.f64", 1e-300)
    w.add_array("t.strs", ["x", "", "ÿ", "<|endoftext|>"])
    w.add_array("t.ints", [1, -2, 3])
    w.add_array("t.floats", [0.5, -1.25])
    w.add_array("t.nested", [[1, 2], [3, 4, 5]])
    rng = np.random.default_rng(3)
    w.add_tensor("a", rng.standard_normal((3, 8)).astype(np.float32))
    w.add_tensor("b", rng.standard_normal((2, 2, 5)).astype(np.float16))
    w.add_tensor("c", rng.integers(0, 255, size=(3, 34), dtype=np.uint8), raw_dtype=GGMLQuantizationType.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("binary", binaries())
def test_varied_file_matches_gguf_py(binary, tmp_path):
    path = tmp_path / "varied.gguf"
    write_varied(path)
    doc = info_json(binary, path)
    assert compare_with_gguf_py(doc, str(path)) >= 15


@pytest.fixture(scope="module")
def model_reader():
    if not MODEL.exists():
        pytest.skip("default model absent")
    return GGUFReader(str(MODEL))  # slow (parses every token string): read once


def test_default_model_matches_gguf_py(model_reader):
    doc = info_json(LLMK, MODEL)
    n_nested = sum(1 for f in model_reader.fields.values() if f.types[:2] == [GGUFValueType.ARRAY] * 2)
    assert compare_with_gguf_py(doc, str(MODEL), model_reader) == len(doc["key_order"]) - n_nested
    assert len(doc["tensors"]) > 0


def test_info_summary_reports_metadata(model_reader):
    r = model_reader
    arch = r.fields["general.architecture"].contents()

    def val(k):
        return r.fields[f"{arch}.{k}"].contents()

    out = run(LLMK, "info", "-m", MODEL)
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode()
    lines = {ln.split()[0]: ln.split()[1:] for ln in text.splitlines() if ln.startswith("  ") and ln.split()}
    assert f"architecture:  {arch}" in text
    assert lines["block_count"] == [str(val("block_count"))]
    assert lines["embedding_length"] == [str(val("embedding_length"))]
    assert lines["feed_forward_length"] == [str(val("feed_forward_length"))]
    assert lines["head_count"] == [str(val("attention.head_count"))]
    assert lines["head_count_kv"] == [str(val("attention.head_count_kv"))]
    assert lines["context_length"] == [str(val("context_length"))]
    assert float(lines["rope.freq_base"][0]) == pytest.approx(val("rope.freq_base"), rel=1e-5)
    assert float(lines["rms_epsilon"][0]) == pytest.approx(val("attention.layer_norm_rms_epsilon"), rel=1e-5)
    n_params = sum(int(t.n_elements) for t in r.tensors)
    n_bytes = sum(int(t.n_bytes) for t in r.tensors)
    assert f"tensors:       {len(r.tensors)}, {n_bytes} bytes" in text
    assert f"{n_params} parameters" in text
    for qt in {t.tensor_type for t in r.tensors}:
        count = sum(1 for t in r.tensors if t.tensor_type == qt)
        name = GGMLQuantizationType(qt).name.lower()
        assert lines[name][0] == str(count), name
    assert f"model {r.fields['tokenizer.ggml.model'].contents()}, pre {r.fields['tokenizer.ggml.pre'].contents()}" in text
    assert f"{len(r.fields['tokenizer.ggml.tokens'].data)} tokens" in text
    has_template = "tokenizer.chat_template" in r.fields
    assert ("chat template: absent" not in text) == has_template
    # the family llmk's chat code recognises (SmolLM2's template is ChatML)
    assert f"chat template: chatml ({len(r.fields['tokenizer.chat_template'].contents())} bytes)" in text
    # general.file_type by llama.cpp's name, as gguf-py spells it
    ft = r.fields["general.file_type"].contents()
    assert f"file type:     {LlamaFileType(ft).name} ({ft})" in text and ft == 3
    assert "GGUF v3" in text
    # default model without arguments, and the tensor listing
    assert run(LLMK, "info").stdout == out.stdout
    listing = run(LLMK, "info", "--tensors", MODEL).stdout.decode()
    assert all(t.name in listing for t in r.tensors)


def test_info_usage():
    r = run(LLMK, "info", "-h")
    assert r.returncode == 0 and b"usage: llmk info" in r.stdout
    r = run(LLMK, "info", "--bogus")
    assert r.returncode == 2 and b"--bogus" in r.stderr
    r = run(LLMK, "info", "/nonexistent/x.gguf")
    assert r.returncode == 1 and b"llmk_not_found" in r.stderr


# ---- hostile files ------------------------------------------------------------

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def header(n_tensors, n_kv, version=3, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv_u32(key, v):
    return gstr(key) + struct.pack("<II", 4, v)


def tinfo(name, ne, ttype, offset):
    return gstr(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", ttype, offset)


def aligned(b, a=32):
    return b + b"\0" * (-len(b) % a)


def one_tensor(ne, ttype, offset, data_bytes, name="blk.3.attn_q.weight"):
    return aligned(header(1, 0) + tinfo(name, ne, ttype, offset)) + b"\0" * data_bytes


HOSTILE = {
    "empty": (b"", "llmk_truncated_file"),
    "bad_magic": (header(0, 0, magic=b"GGML"), "llmk_bad_magic"),
    "version_1": (header(0, 0, version=1), "llmk_bad_version"),
    "version_7": (header(0, 0, version=7), "llmk_bad_version"),
    "huge_tensor_count": (header(2**62, 0) + b"\0" * 64, "llmk_count_too_large"),
    "huge_kv_count": (header(0, 2**63) + b"\0" * 64, "llmk_count_too_large"),
    "huge_array_count": (header(0, 1) + gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2**50) + gstr("a"),
                         "llmk_count_too_large"),
    "wrapping_array_count": (header(0, 1) + gstr("s") + struct.pack("<IIQ", 9, 6, 2**62 + 1), "llmk_count_too_large"),
    "key_length_past_end": (header(0, 1) + struct.pack("<Q", 10**6) + b"general", "llmk_bad_string"),
    "value_length_past_end": (header(0, 1) + gstr("general.name") + struct.pack("<IQ", 8, 2**64 - 1) + b"abc",
                              "llmk_bad_string"),
    "unknown_value_type": (header(0, 1) + gstr("general.x") + struct.pack("<I", 99) + b"\0" * 16, "llmk_unknown_type"),
    "unknown_tensor_type": (one_tensor([32, 2], 5, 0, 256), "llmk_unknown_type"),
    "n_dims_9": (header(1, 0) + gstr("t") + struct.pack("<I", 9) + b"\0" * 100, "llmk_bad_tensor_info"),
    "overflowing_dims": (one_tensor([2**33, 2**33, 2**10], 0, 0, 64), "llmk_dimension_overflow"),
    "misaligned_offset": (one_tensor([32, 2], 0, 4, 512), "llmk_bad_alignment"),
    "offset_out_of_file": (one_tensor([32, 2], 0, 2**40, 512), "llmk_offset_out_of_file"),
    "data_short": (one_tensor([32, 2], 0, 0, 200), "llmk_offset_out_of_file"),
    "bad_alignment_key": (header(0, 1) + kv_u32("general.alignment", 24), "llmk_bad_alignment"),
    "duplicate_key": (header(0, 2) + kv_u32("a.b", 1) + kv_u32("a.b", 2), "llmk_duplicate_name"),
}


@pytest.mark.parametrize("binary", binaries())
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_refused(binary, case, tmp_path):
    data, status = HOSTILE[case]
    p = tmp_path / f"{case}.gguf"
    p.write_bytes(data)
    r = run(binary, "info", p)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (case, r.returncode, err)
    assert f"error: {status}: " in err, err
    assert "Sanitizer" not in err and "runtime error" not in err
    if case == "data_short":  # the message names the tensor and the numbers
        assert "blk.3.attn_q.weight" in err and f"file has {len(data)}" in err


@pytest.mark.parametrize("binary", binaries())
def test_truncated_files_refused(binary, tmp_path):
    full = tmp_path / "varied.gguf"
    write_varied(full)
    data = full.read_bytes()
    r = GGUFReader(str(full))
    data_end = max(t.data_offset + int(t.n_bytes) for t in r.tensors)
    cuts = sorted(set(list(range(0, 40)) + list(range(40, r.data_offset, 23)) +
                      [r.data_offset - 1, r.data_offset, r.data_offset + 5, data_end - 1]))
    p = tmp_path / "cut.gguf"
    for n in cuts:
        p.write_bytes(data[:n])
        res = run(binary, "info", p)
        err = res.stderr.decode(errors="replace")
        assert res.returncode == 1, (n, err)
        assert "error: llmk_" in err and "Sanitizer" not in err and "runtime error" not in err, (n, err)
    p.write_bytes(data[:data_end])  # only trailing padding missing: still a whole file
    assert run(binary, "info", p).returncode == 0


@pytest.mark.parametrize("binary", binaries())
def test_json_survives_invalid_utf8(binary, tmp_path):
    """Metadata strings are bytes: the JSON dump stays valid, bad bytes become U+FFFD."""
    p = tmp_path / "bytes.gguf"
    val = b"ok\xff\xc3(\x00z\xed\xa0\x80"
    p.write_bytes(header(0, 2) + gstr("k.s") + struct.pack("<I", 8) + gstr(val) +
                  gstr("k.a") + struct.pack("<IIQ", 9, 8, 2) + gstr(b"\xf0\x9f\x98\x80") + gstr(b"\xc0\xaf"))
    doc = info_json(binary, p)
    assert doc["version"] == 3 and doc["tensors"] == []
    assert doc["metadata"]["k.s"]["value"] == "ok\ufffd\ufffd(\ufffdz\ufffd\ufffd\ufffd"
    assert doc["metadata"]["k.a"]["value"] == ["\U0001F600", "\ufffd\ufffd"]
