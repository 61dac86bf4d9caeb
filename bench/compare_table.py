"""The tables of bench/compare.sh (not used by tests).

  compare_table.py one LLMK.json LLAMACPP.json MODEL THREADS
      one model: each test's t/s on both sides and llmk/llama.cpp
  compare_table.py types OUTDIR THREADS TYPE...
      -T: one row per type from OUTDIR/TYPE/{llmk,llamacpp}.json
  compare_table.py rounds OUTDIR N MODEL THREADS
      -R N: OUTDIR/round1..N/{llmk,llamacpp}.json, ratios per round and their median"""
import json
import os
import sys


def load(path):
    return json.load(open(path))


def key(o):
    return (o["n_prompt"], o["n_gen"])


def test_name(o):
    name = f"pp{o['n_prompt']}" if o["n_prompt"] else f"tg{o['n_gen']}"
    return name + (f"@d{o['n_depth']}" if o.get("n_depth") else "")


def one(ours_p, theirs_p, model, threads):
    ours, theirs = load(ours_p), load(theirs_p)
    t = {key(o): o for o in theirs}
    print(f"model {os.path.basename(model)}, {threads} threads")
    print(f"| {'test':>12} | {'llmk t/s':>18} | {'llama.cpp t/s':>18} | {'ratio':>6} |")
    print(f"| {'-'*12} | {'-'*18} | {'-'*18} | {'-'*6} |")
    for o in ours:
        l = t.get(key(o))
        if not l:
            continue
        print(f"| {test_name(o):>12} | {o['avg_ts']:8.2f} ± {o['stddev_ts']:7.2f} | "
              f"{l['avg_ts']:8.2f} ± {l['stddev_ts']:7.2f} | {o['avg_ts'] / l['avg_ts']:5.2f}x |")
    for o in ours:
        if "effective_gbs" in o:
            llc = o.get("llc_bytes", 0)
            fit = (f" (the weights fit in the {llc / 1e6:.0f} MB last-level cache)"
                   if llc > o["weight_bytes_per_token"] else "")
            print(f"llmk decode: {o['effective_gbs']:.1f} GB/s of weights, "
                  f"machine reads {o['machine_read_gbs']:.1f} GB/s{fit}")
            if o.get("peak_rss_bytes"):
                print(f"llmk peak RSS {o['peak_rss_bytes'] / 1e6:.1f} MB, file {o['model_size'] / 1e6:.1f} MB")


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def rounds(outdir, n, model, threads):
    """-R: OUTDIR/round1..n/{llmk,llamacpp}.json, run alternately: each
    test's figures per round, the ratio within each round (figures taken
    back to back), and their median."""
    per = [(load(f"{outdir}/round{i}/llmk.json"), load(f"{outdir}/round{i}/llamacpp.json"))
           for i in range(1, n + 1)]
    print(f"model {os.path.basename(model)}, {threads} threads, {n} rounds (llmk and llama.cpp alternately)")
    print(f"| {'test':>12} | " + " | ".join(f"round {i}: llmk / llama.cpp" for i in range(1, n + 1))
          + f" | {'median ratio':>12} |")
    print(f"| {'-'*12} |" + " --- |" * n + f" {'-'*12} |")
    for o in per[0][0]:
        cells, ratios = [], []
        for ours, theirs in per:
            a = next((x for x in ours if key(x) == key(o)), None)
            b = next((x for x in theirs if key(x) == key(o)), None)
            if not a or not b:
                cells.append("-")
                continue
            ratios.append(a["avg_ts"] / b["avg_ts"])
            cells.append(f"{a['avg_ts']:.1f} / {b['avg_ts']:.1f} = {ratios[-1]:.2f}x")
        if ratios:
            print(f"| {test_name(o):>12} | " + " | ".join(cells) + f" | {median(ratios):11.2f}x |")
    for i, (ours, _) in enumerate(per, 1):
        for o in ours:
            if "effective_gbs" in o:
                print(f"round {i}: llmk decode {o['effective_gbs']:.1f} GB/s of weights, "
                      f"machine reads {o['machine_read_gbs']:.1f} GB/s")


def types(outdir, threads, names):
    rows = []
    for n in names:
        ours, theirs = load(f"{outdir}/{n}/llmk.json"), load(f"{outdir}/{n}/llamacpp.json")
        t = {key(o): o for o in theirs}
        cells = []
        for o in ours:
            l = t.get(key(o))
            if l:
                cells.append((test_name(o), o["avg_ts"], l["avg_ts"]))
        rows.append((n, cells))
    tests = [c[0] for c in rows[0][1]]
    print(f"{threads} threads; llmk / llama.cpp t/s = ratio")
    print("| type | " + " | ".join(f"{x} llmk / llama.cpp" for x in tests) + " |")
    print("| --- |" + " --- |" * len(tests))
    for n, cells in rows:
        print(f"| {n} | " + " | ".join(f"{a:.0f} / {b:.0f} = **{a / b:.2f}x**" for _, a, b in cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "one":
        one(*sys.argv[2:6])
    elif sys.argv[1] == "rounds":
        rounds(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "types":
        types(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        raise SystemExit(__doc__)
