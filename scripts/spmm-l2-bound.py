#!/usr/bin/env python3
"""How far the f32 SpMM suite is from the L2's peak, and what that allows (NOTES.md, "SpMM step 24").

Inputs, both from the H100 (commands in NOTES):
  BENCH.json  `tilesparse bench spmm --dtype f32 --json BENCH.json` (event-timed medians, boost clocks)
  NCU.csv     `ncu --csv --metrics M -k 'regex:^(?!.*gemm)' tilesparse bench spmm --dtype f32 --selected-only
              --iters 1 --warmup 0`, with M = gpu__time_duration.sum, lts__throughput.avg.pct_of_peak_sustained_elapsed,
              l1tex__t_sector_hit_rate.pct, lts__t_bytes.sum, sm__warps_active.avg.pct_of_peak_sustained_active

Prints a markdown table (per problem: the selected CUDA-core kernel and cuSPARSE's csrmm_v3_kernel under ncu) and
the geometric mean over the best cuSPARSE algorithm that the suite would reach if every problem not on the tensor
cores moved its L2 traffic at a given share of the L2's peak (and no launch took less than a floor), the
tensor-core problems as measured. The bench runs the problems in order and, per problem, our kernels before
cuSPARSE's; that order is how the kernels in the CSV are assigned to problems.

usage: spmm-l2-bound.py BENCH.json NCU.csv
"""
import csv
import io
import json
import math
import sys


def ncu_kernels(path):
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    body = "\n".join(line for line in lines[start:] if line.startswith('"'))
    kernels = {}
    for r in csv.DictReader(io.StringIO(body)):
        kernels.setdefault((int(r["ID"]), r["Kernel Name"]), {})[r["Metric Name"]] = float(
            r["Metric Value"].replace(",", "")
        )
    return kernels


def per_problem(kernels):
    """[{'ours': [(name, metrics)], 'v3': metrics}] in problem order."""
    groups, cur = [], {"ours": []}
    for (_, name), m in kernels.items():
        ours = name.startswith("spmm_") and "fixup" not in name
        if ours and "v3" in cur:
            groups.append(cur)
            cur = {"ours": []}
        if ours:
            cur["ours"].append((name, m))
        if "csrmm_v3_kernel" in name:
            cur["v3"] = m
    groups.append(cur)
    return groups


def main():
    bench = json.load(open(sys.argv[1]))
    groups = per_problem(ncu_kernels(sys.argv[2]))
    if len(groups) != len(bench):
        sys.exit(f"{len(groups)} problems in the CSV, {len(bench)} in the JSON")
    print("| problem | selected kernel (ncu) | us | L2 % of peak | L1 hits % | L2 TB/s | warps % "
          "| csrmm_v3 us | L2 % | L1 hits % | L2 TB/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for p, g in zip(bench, groups):
        cuda_core = [x for x in g["ours"] if "_tc_" not in x[0]]
        name, m = (cuda_core or g["ours"])[0]
        selected = p["selected"]["name"]
        if not (selected == name or ("_tc_" in name and "_tc_" in selected)):
            sys.exit(f"{p['problem']}: the JSON selected {selected}, the CSV's kernel is {name}: different trees?")
        v = g["v3"]
        t, tv = m["gpu__time_duration.sum"] / 1e3, v["gpu__time_duration.sum"] / 1e3
        l2 = "lts__throughput.avg.pct_of_peak_sustained_elapsed"
        hit = "l1tex__t_sector_hit_rate.pct"
        print(f"| {p['problem']} | {name[5:]} | {t:.1f} | {m[l2]:.1f} | {m[hit]:.1f} | "
              f"{m['lts__t_bytes.sum'] / t / 1e6:.2f} | {m['sm__warps_active.avg.pct_of_peak_sustained_active']:.1f} "
              f"| {tv:.1f} | {v[l2]:.1f} | {v[hit]:.1f} | {v['lts__t_bytes.sum'] / tv / 1e6:.2f} |")
        timed = [c["ms"] for c in p["cusparse"] if isinstance(c.get("ms"), float)]  # as spmm-table.py: failed runs
        if not isinstance(p["selected"].get("ms"), float) or not timed:
            sys.exit(f"{p['problem']}: no time for our kernel or for any cuSPARSE algorithm in the JSON")
        ours_us = p["selected"]["ms"] * 1e3
        cusparse_us = min(timed) * 1e3
        # Time at 100% of the L2's peak, at boost clocks: the ncu share of the kernel's time, scaled to the bench.
        scale = ours_us / t
        rows.append((p["problem"], "_tc_" in name, ours_us, cusparse_us, t * m[l2] / 100 * scale,
                     min(t * m[l2], tv * v[l2]) / 100 * scale))
    print()
    now = math.exp(sum(math.log(c / o) for _, _, o, c, _, _ in rows) / len(rows))
    print(f"geometric mean over the best cuSPARSE algorithm, measured: {now:.3f}x")
    for traffic in ("ours", "lesser of ours and csrmm_v3"):
        for share in (100, 90, 85, 80):
            for floor in (4.9, 6.0):
                logs = []
                for _, tc, o, c, at_peak, at_peak_min in rows:
                    bound = at_peak if traffic == "ours" else at_peak_min
                    logs.append(math.log(c / o if tc else c / max(bound * 100 / share, floor)))
                print(f"L2 traffic: {traffic}; at {share}% of the L2's peak, launch floor {floor} us: "
                      f"{math.exp(sum(logs) / len(logs)):.3f}x")


if __name__ == "__main__":
    main()
