#!/usr/bin/env python3
"""The forward's and the backward's expert GEMMs of the held-out one-GPU runs (lr1e-4/), measured in the profiling
step against the planner's price per launch, with and without the host's issue after the routing sync: ms a step.
From the repository root, with build/sextant:
    python3 docs/validation/2026-11-26-moe-launches/forward_ops.py > docs/validation/2026-11-26-moe-launches/forward_ops.txt
The planner's op times come from `sextant estimate --format json` with the shipped overlay, and with a copy of it
whose gemm_issue_us row is removed (no issue priced: the kernel launch stands in, 3.6 us)."""
import csv, json, os, subprocess, tempfile

D = "docs/validation/2026-11-26-moe-launches"
ZOO = D + "/zoo_moe_heldout.csv"
OVERLAY = "hwdb/measured/h100-sxm.csv"
RUNS = [("moe-test", 2), ("moe-test", 4), ("moe-test", 8), ("moe-fine", 4), ("moe-fine", 8), ("moe-wide", 4)]
OPS = ["expert_up", "expert_down", "expert_up_dgrad", "expert_up_wgrad", "expert_down_dgrad", "expert_down_wgrad"]


def planned(model, mbs, overlay):
    out = subprocess.run(["build/sextant", "estimate", model, "--models", ZOO, "--gpu", "h100-sxm", "--gpus", "1",
                          "--mbs", str(mbs), "--gbs", str(4 * mbs), "--seq", "1024", "--attention", "sextant",
                          "--no-dropout", "--calibration", overlay, "--format", "json", "--ops"],
                         check=True, capture_output=True, text=True).stdout
    ops = {}
    for o in json.loads(out)["stages"][0]["ops"]:
        ops[o["name"]] = ops.get(o["name"], 0.0) + o["time_s"] * o["count"] * 4   # 4 micro-batches a step
    return ops


with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    f.writelines(line for line in open(OVERLAY) if ",gemm_issue_us," not in line)
    without = f.name
print("run          op                  measured  per launch  + host issue   (ms a step; profiling step)")
for model, mbs in RUNS:
    name = {"moe-test": "test", "moe-fine": "fine", "moe-wide": "wide"}[model]
    measured = {r["op"]: float(r["measured_s"]) for r in csv.DictReader(open(f"{D}/lr1e-4/t_{name}_mbs{mbs}.csv"))
                if r["calibrated"] == "1"}
    a, b = planned(model, mbs, without), planned(model, mbs, OVERLAY)
    for op in OPS:
        print(f"{name}_mbs{mbs:<5} {op:<18} {measured[op] * 1e3:8.3f}  {a[op] * 1e3:10.3f}  {b[op] * 1e3:12.3f}")
os.unlink(without)
