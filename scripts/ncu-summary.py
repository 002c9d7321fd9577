#!/usr/bin/env python3
"""Sums Nsight Compute kernel durations by kernel name, in launch order of first appearance.

    ncu --csv --metrics gpu__time_duration.sum --clock-control none PROGRAM ARGS > ncu.csv
    scripts/ncu-summary.py ncu.csv
"""
import csv
import sys
from collections import OrderedDict

rows = OrderedDict()
with open(sys.argv[1], newline="") as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0]
    value = float(r["Metric Value"].replace(",", ""))
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[r["Metric Unit"]]
    count, total = rows.get(name, (0, 0.0))
    rows[name] = (count + 1, total + value * scale)
grand = sum(t for _, t in rows.values())
print(f"{'kernel':<60} {'launches':>8} {'total us':>10} {'mean us':>9} {'share':>6}")
for name, (count, total) in rows.items():
    print(f"{name[:60]:<60} {count:>8} {total:>10.1f} {total / count:>9.2f} {100 * total / grand:>5.1f}%")
print(f"{'all':<60} {sum(c for c, _ in rows.values()):>8} {grand:>10.1f}")
