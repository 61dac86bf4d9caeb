"""`llmk bench -B` (issue 17): llama-batched-bench's figures for B sequences
decoded together. The JSON lines carry llama-batched-bench's keys with its
arithmetic (N_KV = B*(PP+TG), S_PP = B*PP/T_PP, S_TG = B*TG/T_TG, S =
N_KV/T); bench/compare_batched.py reads them; bad lists and combinations
are usage errors. Speed itself is measured by bench/compare.sh -B, not here."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("LLMK_BIN", str(ROOT / "build" / "llmk"))
MODEL = Path(os.environ.get("LLMK_MODELS", Path.home() / ".cache" / "llmk")) / \
    "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="default model not present")


def llmk(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_json_lines_have_llama_batched_bench_keys_and_arithmetic():
    r = llmk("bench", "-m", MODEL, "-B", "3,1,2", "-p", 20, "-n", 6, "-t", 2, "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [o["pl"] for o in rows] == [3, 1, 2]  # in the order given
    for o in rows:
        for k in ("n_kv_max", "n_batch", "n_threads", "pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg",
                  "speed_tg", "t", "speed"):
            assert k in o, (k, o)
        b = o["pl"]
        assert (o["pp"], o["tg"], o["n_threads"], o["is_pp_shared"]) == (20, 6, 2, 0)
        assert o["n_kv"] == b * 26
        assert o["n_kv_max"] == 3 * 128  # three sequences of one 128-position block each
        assert o["t_pp"] > 0 and o["t_tg"] > 0
        assert o["speed_pp"] == pytest.approx(b * 20 / o["t_pp"], rel=1e-3)
        assert o["speed_tg"] == pytest.approx(b * 6 / o["t_tg"], rel=1e-3)
        assert o["t"] == pytest.approx(o["t_pp"] + o["t_tg"], abs=2e-6)
        assert o["speed"] == pytest.approx(o["n_kv"] / o["t"], rel=1e-3)


def test_table_and_compare_batched_reads_it(tmp_path):
    r = llmk("bench", "-m", MODEL, "-B", "1,2", "-p", 8, "-n", 4, "-t", 1)
    assert r.returncode == 0, r.stderr
    head = next(line for line in r.stdout.splitlines() if line.startswith("|") and "PP" in line)
    assert [c.strip() for c in head.strip("|").split("|")] == \
        ["PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s"]
    body = [line for line in r.stdout.splitlines() if line.startswith("|") and line[1:].strip()[:1].isdigit()]
    assert [int(line.split("|")[3]) for line in body] == [1, 2]
    # the JSON form through the comparison script, with itself as "llama.cpp"
    r = llmk("bench", "-m", MODEL, "-B", "1,2", "-p", 8, "-n", 4, "-t", 1, "--json")
    f = tmp_path / "b.jsonl"
    f.write_text(r.stdout)
    c = subprocess.run([sys.executable, ROOT / "bench" / "compare_batched.py", f, f, "--model", MODEL,
                        "--threads", "1", "--batch", "1,2"], capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    assert c.stdout.count("1.00x") >= 4, c.stdout


def phase_tables(text):
    """{B: {kind: us per step}} from --phases' tables."""
    tables, b = {}, None
    for line in text.splitlines():
        if line.startswith("phases (decode, B="):
            b = int(line.split("B=")[1].split(",")[0])
            tables[b] = {}
        elif b is not None and line.startswith("  ") and not line.split()[0] == "phase":
            kind, us, share = line.split()
            tables[b][kind] = float(us)
    return tables


def test_phases_time_the_batched_decode_in_place():
    """--phases with -B: after the table, each count's decode step by phase
    kind, timed inside the fused generation; the kinds add up to the step
    time the row reports (T_TG / TG). With --json the tables go to stderr."""
    r = llmk("bench", "-m", MODEL, "-B", "1,4", "-p", 16, "-n", 8, "-t", 2, "--phases", "--json")
    assert r.returncode == 0, r.stderr
    rows = {o["pl"]: o for o in map(json.loads, r.stdout.splitlines())}
    tables = phase_tables(r.stderr)
    assert sorted(tables) == sorted(rows) == [1, 4], r.stderr
    for b, t in tables.items():
        for kind in ("embed", "qkv", "attn", "gate_up", "ffn_down", "lm_head", "argmax"):
            assert t.get(kind, 0) > 0, (b, kind, t)
        step_us = rows[b]["t_tg"] / 8 * 1e6
        assert 0.7 * step_us < sum(t.values()) <= 1.01 * step_us + 1, (b, sum(t.values()), step_us)
    r = llmk("bench", "-m", MODEL, "-B", "2", "-p", 8, "-n", 4, "-t", 2, "--phases")
    assert r.returncode == 0, r.stderr
    assert sorted(phase_tables(r.stdout)) == [2], r.stdout


@pytest.mark.parametrize("args, words", [
    (["-B", "0"], "1..1024"), (["-B", "x"], "got 'x'"), (["-B", "1,,2"], "got '1,,2'"),
    (["-B", "4,"], "got '4,'"), (["-B", "1025"], "1..1024"), (["-B", "2,2"], "2 twice"),
    (["-B", "1", "--path", "f32"], "fast path only"), (["-B", "1", "-d", "8"], "-d"),
    (["-B", "1", "--phases", "-n", "0"], "-n 1"), (["-B", "1", "-p", "0"], "-p 1"),
])
def test_bad_lists_and_combinations(args, words):
    r = llmk("bench", "-m", MODEL, *args)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert words in r.stderr, r.stderr


def test_pool_refusal_names_the_figures():
    # 1024 sequences of 4096 positions: the pool is refused by the memory
    # budget before anything is allocated, with the figures.
    r = llmk("bench", "-m", MODEL, "-B", "1024", "-p", 4000, "-n", 96, "-t", 1)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "llmk_out_of_memory" in r.stderr and "for 1024 sequences" in r.stderr and "GiB" in r.stderr, r.stderr
