"""The comparison tables of bench/compare.sh (its speed figures are not
tests, but the team reads its ratios): compare_batched.py's own self-test,
and compare_table.py's -R rounds table on figures written here, whose
median is not the ratio of the mean speeds."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_compare_batched_self_test():
    r = subprocess.run([sys.executable, ROOT / "bench" / "compare_batched.py", "--self-test"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "self-test passed" in r.stdout


def test_compare_table_rounds_median(tmp_path):
    # llmk / llama.cpp per round: pp 2.0, 1.5, 3.0 (median 2.0; the means give 2.08);
    # tg 4.0, 1.0, 2.5 (median 2.5; the means give 2.15)
    rounds = [((200, 400), (100, 100)), ((300, 100), (200, 100)), ((600, 250), (200, 100))]
    for i, ((pp, tg), (lpp, ltg)) in enumerate(rounds, 1):
        d = tmp_path / f"round{i}"
        d.mkdir()
        ours = [{"n_prompt": 512, "n_gen": 0, "avg_ts": pp, "stddev_ts": 0},
                {"n_prompt": 0, "n_gen": 128, "avg_ts": tg, "stddev_ts": 0,
                 "effective_gbs": 40.0, "machine_read_gbs": 50.0}]
        theirs = [{"n_prompt": 512, "n_gen": 0, "avg_ts": lpp, "stddev_ts": 0},
                  {"n_prompt": 0, "n_gen": 128, "avg_ts": ltg, "stddev_ts": 0}]
        (d / "llmk.json").write_text(json.dumps(ours))
        (d / "llamacpp.json").write_text(json.dumps(theirs))
    r = subprocess.run([sys.executable, ROOT / "bench" / "compare_table.py", "rounds", tmp_path, "3", "m.gguf", "2"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {line.split("|")[1].strip(): line for line in r.stdout.splitlines() if line.startswith("|")}
    assert rows["pp512"].split("|")[-2].strip() == "2.00x", r.stdout
    assert rows["tg128"].split("|")[-2].strip() == "2.50x", r.stdout
    assert "1.50x" in rows["pp512"] and "4.00x" in rows["tg128"]
    assert r.stdout.count("machine reads 50.0 GB/s") == 3
