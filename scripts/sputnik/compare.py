#!/usr/bin/env python3
"""tilesparse against Sputnik, problem by problem: a `tilesparse bench spmm --json` file and a `sputnik_bench --json`
file of the same problems (by name) and type.

    scripts/sputnik/compare.py OURS.json SPUTNIK.json

Prints a markdown table (ours, Sputnik as the faster of its two forms of A, cuSPARSE's best algorithm as each program
timed it, the ratios) and geometric means. The two cuSPARSE columns time the same library on the same shapes in two
programs; their agreement checks that the programs time alike."""
import json
import math
import sys


def geo(v):
    return math.exp(sum(map(math.log, v)) / len(v))


def main(ours_path, sputnik_path):
    ours = json.load(open(ours_path))
    sputnik = {p["problem"]: p for p in json.load(open(sputnik_path))}
    rows, missing = [], []
    print("| problem | ours us (kernel) | Sputnik us | cuSPARSE us (ours' run / Sputnik's) | ours vs Sputnik "
          "| Sputnik vs cuSPARSE | ours vs cuSPARSE |")
    print("|---|---|---:|---|---:|---:|---:|")
    for p in ours:
        s = sputnik.get(p["problem"])
        if s is None:
            missing.append(p["problem"])
            continue
        o = p["selected"]["ms"] * 1e3
        kernel = p["selected"]["name"].split(" ")[0].replace("spmm_", "")
        sp = min(s["sputnik_ms"]) * 1e3
        cs_ours = min(c["ms"] for c in p["cusparse"] if "ms" in c) * 1e3
        cs_sp = min(x for x in s["cusparse_ms"] if x == x) * 1e3
        rows.append((p["problem"], o, sp, cs_ours, cs_sp))
        print(f"| {p['problem']} | {o:.1f} ({kernel}) | {sp:.1f} | {cs_ours:.1f} / {cs_sp:.1f} | {sp / o:.2f}x "
              f"| {cs_sp / sp:.2f}x | {cs_ours / o:.2f}x |")
    if not rows:
        sys.exit("no problem in both files")
    r = [x[2] / x[1] for x in rows]
    print(f"\n{len(rows)} problems. ours vs Sputnik: geometric mean {geo(r):.3f}x (min {min(r):.2f}x, max "
          f"{max(r):.2f}x), {sum(x < 1 for x in r)} below 1.0x")
    print(f"Sputnik vs cuSPARSE (Sputnik's run): {geo([x[4] / x[2] for x in rows]):.3f}x; "
          f"ours vs cuSPARSE (ours' run): {geo([x[3] / x[1] for x in rows]):.3f}x")
    a = [x[4] / x[3] for x in rows]
    print(f"cuSPARSE, Sputnik's run over ours': {geo(a):.3f} (min {min(a):.2f}, max {max(a):.2f})")
    below = [(x[0], round(x[2] / x[1], 2)) for x in rows if x[2] < x[1]]
    if below:
        print("below 1.0x:", ", ".join(f"{n} {v}x" for n, v in below))
    if missing:
        print("not run by Sputnik:", ", ".join(missing))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
