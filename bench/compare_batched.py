"""The batched table of bench/compare.sh -B: `llmk bench -B LIST --json` next
to llama.cpp's `llama-batched-bench --output-format jsonl`, one row per B
(sequences decoded together): S_PP and S_TG of each (tokens/s over all
sequences) with llmk/llama.cpp, and each one's S_TG(B)/S_TG(1).

Both inputs are read tolerantly, so the two formats can be reconciled later:
a JSON array, JSON lines or concatenated objects, with other text (log
lines) skipped; keys are matched case-insensitively up to the first space
("S_TG t/s" is s_tg), and llama-batched-bench's names (pl, pp, tg, speed_pp,
speed_tg, speed) are also accepted as b/n_pl, n_prompt, n_gen, s_pp, s_tg, s.
A missing speed is derived from its time (S_TG = B*TG/T_TG). Not used by
tests; `python3 bench/compare_batched.py --self-test` checks the parser."""
import argparse
import json
import os
import sys

ALIASES = {
    "b": "pl", "n_pl": "pl", "n_parallel": "pl", "n_seq": "pl", "batch": "pl",
    "n_pp": "pp", "n_prompt": "pp", "npp": "pp",
    "n_tg": "tg", "n_gen": "tg", "ntg": "tg",
    "s_pp": "speed_pp", "s_tg": "speed_tg", "s": "speed",
}


def norm_key(k):
    k = str(k).strip().lower().split(" ")[0]
    return ALIASES.get(k, k)


def json_objects(text):
    """Every JSON object in text (arrays flattened), skipping other text."""
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            return out
        i = min(starts)
        try:
            v, end = dec.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        stack = [v]
        while stack:
            x = stack.pop(0)
            if isinstance(x, dict):
                out.append(x)
            elif isinstance(x, list):
                stack[:0] = x
        i = end


def rows(text, who):
    """{B: row} with normalized keys; the row's pp/tg/pl as ints."""
    res = {}
    for o in json_objects(text):
        r = {norm_key(k): v for k, v in o.items()}
        if "pl" not in r:
            continue
        try:
            b = int(r["pl"])
            r["pp"], r["tg"] = int(r.get("pp", 0)), int(r.get("tg", 0))
        except (TypeError, ValueError):
            raise SystemExit(f"compare_batched: {who}: bad B/PP/TG in {o}")
        if "speed_tg" not in r and r.get("t_tg"):
            r["speed_tg"] = b * r["tg"] / float(r["t_tg"])
        if "speed_pp" not in r and r.get("t_pp"):
            r["speed_pp"] = b * r["pp"] / float(r["t_pp"])
        if b in res:
            raise SystemExit(f"compare_batched: {who}: B={b} twice")
        res[b] = r
    return res


def fmt(x, w=9):
    return f"{float(x):{w}.2f}" if x is not None else f"{'-':>{w}}"


def ratio(a, b):
    return f"{float(a) / float(b):6.2f}x" if a is not None and b else f"{'-':>7}"


def table(ours, theirs, batch, model, threads):
    missing = [f"{who} B={b}" for b in batch for who, d in (("llmk", ours), ("llama.cpp", theirs)) if b not in d]
    if missing:
        raise SystemExit("compare_batched: no figures for " + ", ".join(missing)
                         + " (llama-batched-bench skips a test that does not fit its context)")
    for b in batch:
        o, l = ours[b], theirs[b]
        if (o["pp"], o["tg"]) != (l["pp"], l["tg"]):
            raise SystemExit(f"compare_batched: B={b}: llmk ran PP={o['pp']} TG={o['tg']}, "
                             f"llama.cpp PP={l['pp']} TG={l['tg']}")
    l0 = theirs[batch[0]]
    fa = {-1: "auto", 0: "off", 1: "on"}.get(l0.get("flash_attn"), l0.get("flash_attn"))
    out = [f"model {os.path.basename(model)}, {threads} threads, PP={l0['pp']} TG={l0['tg']} per sequence"
           + (f"; llama.cpp n_kv_max {l0['n_kv_max']}, flash_attn {fa}" if "n_kv_max" in l0 else ""),
           "S_PP, S_TG: tokens/s over all B sequences; scale: S_TG(B)/S_TG(1)",
           f"| {'B':>3} | {'llmk S_PP':>9} | {'llama S_PP':>10} | {'ratio':>7} "
           f"| {'llmk S_TG':>9} | {'llama S_TG':>10} | {'ratio':>7} | {'llmk scale':>10} | {'llama scale':>11} |",
           f"| {'-'*3} | {'-'*9} | {'-'*10} | {'-'*7} | {'-'*9} | {'-'*10} | {'-'*7} | {'-'*10} | {'-'*11} |"]
    o1, l1 = ours.get(1, {}).get("speed_tg"), theirs.get(1, {}).get("speed_tg")
    for b in batch:
        o, l = ours[b], theirs[b]
        out.append(f"| {b:>3} | {fmt(o.get('speed_pp'))} | {fmt(l.get('speed_pp'), 10)} | "
                   f"{ratio(o.get('speed_pp'), l.get('speed_pp'))} | {fmt(o.get('speed_tg'))} | "
                   f"{fmt(l.get('speed_tg'), 10)} | {ratio(o.get('speed_tg'), l.get('speed_tg'))} | "
                   f"{ratio(o.get('speed_tg'), o1):>10} | {ratio(l.get('speed_tg'), l1):>11} |")
    return "\n".join(out)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def rounds_table(pairs, batch):
    """Rounds (llmk, llama.cpp) run alternately: per B the median over rounds
    of each round's ratios (S_PP, S_TG llmk/llama.cpp, and each side's
    S_TG(B)/S_TG(1) within its round) with their range. A ratio of two
    figures measured minutes apart follows the host's speed as much as the
    engines' (this host's bandwidth moves by a third within an hour); a
    round's ratio compares figures taken back to back."""
    cols = {b: {"pp": [], "tg": [], "ours": [], "theirs": []} for b in batch}
    for ours, theirs in pairs:
        o1, l1 = ours.get(1, {}).get("speed_tg"), theirs.get(1, {}).get("speed_tg")
        for b in batch:
            o, l = ours[b], theirs[b]
            c = cols[b]
            if o.get("speed_pp") and l.get("speed_pp"):
                c["pp"].append(float(o["speed_pp"]) / float(l["speed_pp"]))
            c["tg"].append(float(o["speed_tg"]) / float(l["speed_tg"]))
            if o1 and l1:
                c["ours"].append(float(o["speed_tg"]) / float(o1))
                c["theirs"].append(float(l["speed_tg"]) / float(l1))

    def cell(xs, w):
        if not xs:
            return f"{'-':>{w}}"
        return f"{median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})".rjust(w)

    out = [f"{len(pairs)} rounds, llmk and llama.cpp alternately; median over rounds (range)",
           f"| {'B':>3} | {'S_PP ratio':>19} | {'S_TG ratio':>19} | {'llmk scale':>19} | {'llama scale':>19} |",
           f"| {'-'*3} | {'-'*19} | {'-'*19} | {'-'*19} | {'-'*19} |"]
    for b in batch:
        c = cols[b]
        out.append(f"| {b:>3} | {cell(c['pp'], 19)} | {cell(c['tg'], 19)} | {cell(c['ours'], 19)} | "
                   f"{cell(c['theirs'], 19)} |")
    return "\n".join(out)


def self_test():
    llama = (
        "\n"
        '{"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, '
        '"n_gpu_layers": -1, "n_threads": 2, "n_threads_batch": 2, "pp": 128, "tg": 128, "pl": 1, '
        '"n_kv": 256, "t_pp": 0.5, "speed_pp": 256.0, "t_tg": 1.28, "speed_tg": 100.0, "t": 1.78, "speed": 143.8}\n'
        '{"n_kv_max": 4096, "pp": 128, "tg": 128, "pl": 16, "n_kv": 4096, "t_pp": 4.0, "speed_pp": 512.0, '
        '"t_tg": 8.192, "speed_tg": 250.0, "t": 12.192, "speed": 335.96}\n'
        "llama_perf_context_print: load time = 1 ms\n")
    # llmk as an array with upper-case column names
    arr = json.dumps([{"PP": 128, "TG": 128, "B": 1, "N_KV": 256, "T_PP": 0.25, "S_PP": 512.0,
                       "T_TG": 0.64, "S_TG": 200.0, "T": 0.89, "S": 431.5},
                      {"PP": 128, "TG": 128, "B": 16, "N_KV": 4096, "T_PP": 2.0, "S_PP": 1024.0,
                       "T_TG": 1.6384, "S_TG": 1250.0, "T": 3.6384, "S": 1125.9}])
    # llmk as JSON lines with llama-batched-bench's keys, one speed left out
    jl = ('{"pp": 128, "tg": 128, "pl": 1, "t_pp": 0.25, "speed_pp": 512.0, "t_tg": 0.64, "speed_tg": 200.0}\n'
          '{"pp": 128, "tg": 128, "pl": 16, "t_pp": 2.0, "speed_pp": 1024.0, "t_tg": 1.6384}\n')
    # llmk with s_pp/s_tg/s names, pretty-printed objects one after another
    sn = (json.dumps({"n_prompt": 128, "n_gen": 128, "b": 1, "s_pp": 512.0, "s_tg": 200.0, "s": 1.0}, indent=1)
          + json.dumps({"n_prompt": 128, "n_gen": 128, "b": 16, "s_pp": 1024.0, "s_tg": 1250.0, "s": 1.0}, indent=1))
    theirs = rows(llama, "llama.cpp")
    assert sorted(theirs) == [1, 16] and theirs[16]["speed_tg"] == 250.0
    for text in (arr, jl, sn):
        ours = rows(text, "llmk")
        assert sorted(ours) == [1, 16], ours
        assert abs(ours[16]["speed_tg"] - 1250.0) < 1e-9 and ours[1]["speed_pp"] == 512.0
        t = table(ours, theirs, [1, 16], "m.gguf", 2)
        last = t.splitlines()[-1]
        assert " 2.00x" in last and " 5.00x" in last and " 6.25x" in last and " 2.50x" in last, t
    print(t)
    for bad, msg in (('[{"pp":128,"tg":128,"pl":1,"speed_tg":1}]', "no figures for llmk B=16"),
                     ('[{"pp":64,"tg":128,"pl":1,"speed_tg":1},{"pp":64,"tg":128,"pl":16,"speed_tg":1}]',
                      "llmk ran PP=64")):
        try:
            table(rows(bad, "llmk"), theirs, [1, 16], "m.gguf", 2)
        except SystemExit as e:
            assert msg in str(e), e
        else:
            raise AssertionError(bad)
    # rounds: the medians of per-round ratios, ranges from the rounds
    ours2 = rows(arr.replace("1250.0", "1500.0"), "llmk")
    r = rounds_table([(rows(arr, "llmk"), theirs), (ours2, theirs), (ours2, theirs)], [1, 16])
    last = r.splitlines()[-1]
    assert "6.00x (5.00-6.00)" in last and "7.50x (6.25-7.50)" in last and "2.50x (2.50-2.50)" in last, r
    print("compare_batched: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", metavar="LLMK LLAMACPP",
                    help="llmk's and llama.cpp's figures; more pairs: rounds run alternately")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", required=True)
    ap.add_argument("--batch", required=True, help="the -B list, as 1,4,16")
    a = ap.parse_args()
    if len(a.files) % 2:
        ap.error("files come in pairs: llmk's, then llama.cpp's")
    batch = [int(x) for x in a.batch.split(",")]
    pairs = [(rows(open(a.files[i]).read(), "llmk"), rows(open(a.files[i + 1]).read(), "llama.cpp"))
             for i in range(0, len(a.files), 2)]
    for i, (ours, theirs) in enumerate(pairs):
        if len(pairs) > 1:
            print(f"round {i + 1}:")
        print(table(ours, theirs, batch, a.model, a.threads))
    if len(pairs) > 1:
        print()
        print(rounds_table(pairs, batch))


if __name__ == "__main__":
    main()
