#!/usr/bin/env python3
"""The SpMM suite as a Markdown table, from `tilesparse bench spmm [--dtype f16|bf16] --json FILE` (NOTES.md, "SpMM
steps 22 and 23").

    scripts/spmm-table.py spmm-f32.json [CEILING_TFLOPS FLOOR_US]

Ratios are cuSPARSE's (or cuBLAS's) median time over ours. With CEILING_TFLOPS and FLOOR_US (measured by
scripts/spmm-ceiling.cu and `tilesparse spmm` on a 1 x 1 matrix), a last column gives the time the tiled design
could reach at best: max(FLOPs / ceiling, floor), and the ratio to cuSPARSE that time would give (not for the
problems on the tensor cores, which the ceiling of the CUDA-core design does not bound).
"""
import json
import math
import sys

reports = json.load(open(sys.argv[1]))
ceiling = float(sys.argv[2]) * 1e12 if len(sys.argv) > 2 else None
floor_ms = float(sys.argv[3]) * 1e-3 if len(sys.argv) > 3 else 0.0


def ms(entry):
    return entry.get("ms") if isinstance(entry.get("ms"), float) else None


head = "| problem | m x k, nnz | n | selected | ours us | TFLOP/s | best variant us | cuSPARSE best us | cuBLAS us | vs cuSPARSE | vs cuBLAS |"
if ceiling:
    head += " design bound us (vs cuSPARSE) |"
print(head)
print("|" + "---|" * 4 + "---:|" * (head.count("|") - 5))
logs = []
for r in reports:
    flops = 2.0 * r["nnz"] * r["n"]
    ours = ms(r["selected"])
    cusparse = [e for e in r["cusparse"] if ms(e)]
    best = min(cusparse, key=ms) if cusparse else None
    variants = [ms(e) for e in r["variants"] if ms(e)]
    cublas = ms(r["cublas"])
    vs = ms(best) / ours if best and ours else None
    if vs:
        logs.append(math.log(vs))
    fmt = lambda x, f="{:.1f}": f.format(x) if x is not None else "-"
    row = [
        r["problem"],
        f"{r['m']}x{r['k']}, {r['nnz']}",
        str(r["n"]),
        r["selected"]["name"].removeprefix("spmm_"),
        fmt(ours * 1e3 if ours else None),
        fmt(flops / ours / 1e9 if ours else None, "{:.2f}"),
        fmt(min(variants) * 1e3 if variants else None),
        f"{ms(best) * 1e3:.1f} ({best['name'].removeprefix('cusparse_CSR_')})" if best else "-",
        fmt(cublas * 1e3 if cublas else None),
        fmt(vs, "{:.2f}x"),
        fmt(cublas / ours if cublas and ours else None, "{:.2f}x"),
    ]
    if ceiling:
        bound = max(flops / ceiling * 1e3, floor_ms)
        tensor_cores = r["selected"]["name"].startswith("spmm_tc")
        row.append("- (tensor cores)" if tensor_cores else f"{bound * 1e3:.1f} ({ms(best) / bound:.2f}x)" if best else "-")
    print("| " + " | ".join(row) + " |")
if logs:
    print(f"\nGeometric mean over the best cuSPARSE algorithm: {math.exp(sum(logs) / len(logs)):.3f}x over {len(logs)} "
          f"problems (min {math.exp(min(logs)):.2f}x, max {math.exp(max(logs)):.2f}x)")
