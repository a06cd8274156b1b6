#!/usr/bin/env python3
# The step and memory errors of every run in run/: one row per run, from the CSVs' step rows
# (calibrated=1: the overlay the run was given; calibrated=0: hwdb defaults, same measured step).
# Usage: table.py [DIR [GLOB]] (GLOB: the CSVs to read, default *_mbs*.csv).
import csv, glob, os, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../tests/data/2026-11-25-h100-fitted-shipped")
print(f"{'run':28s} {'measured ms':>11s} {'cal. ms':>8s} {'error':>7s} {'default ms':>10s} {'error':>7s} {'mem GiB':>8s} {'mem err':>7s}")
for path in sorted(glob.glob(os.path.join(d, sys.argv[2] if len(sys.argv) > 2 else "*_mbs*.csv"))):
    step = {}
    for row in csv.DictReader(open(path)):
        if row["op"] == "step":
            step[row["calibrated"]] = row
    cal, dflt = step["1"], step.get("0")
    m = float(cal["measured_s"]); p = float(cal["predicted_s"])
    mb, pb = float(cal["measured_bytes"]), float(cal["predicted_bytes"])
    line = f"{os.path.basename(path)[:-4]:28s} {m*1e3:11.2f} {p*1e3:8.2f} {100*(p-m)/m:+6.1f}%"
    if dflt:
        pd = float(dflt["predicted_s"]); line += f" {pd*1e3:10.2f} {100*(pd-m)/m:+6.1f}%"
    else:
        line += f" {'':10s} {'':7s}"
    print(line + f" {mb/2**30:8.3f} {100*(pb-mb)/mb:+6.1f}%")
