#!/usr/bin/env python3
"""Where the host issues OLMoE's steps: the profiling step's timelines (SEXTANT_TIMELINE with host times, dff53ed) of
its one GPU, TP 2 + SP and PP 2 layouts at random, per pass: the GPU's time on the step's stream, the host's time
issuing the calls, and the GPU's idle time before calls it began within 50 us of their issue (the queue was empty:
it waited for the host).  Run from the repository root:
    python3 docs/validation/2026-11-28-moe-host-issue/timelines.py"""
import csv
import gzip
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "timelines")
EXPERT = ("expert_up", "expert_down", "expert_up_dgrad", "expert_up_wgrad", "expert_down_dgrad", "expert_down_wgrad")


def passes(path):
    rows = [r for r in csv.DictReader(gzip.open(path, "rt")) if r["side"] == "0"]
    rows.sort(key=lambda r: float(r["start_ms"]))
    out = {}
    prev_end = 0.0
    for r in rows:
        s, e = float(r["start_ms"]), float(r["end_ms"])
        hb, he = float(r["host_begin_ms"]), float(r["host_end_ms"])
        p = out.setdefault(r["pass"], {"gpu": 0.0, "host": 0.0, "waited": 0.0, "expert_gpu": 0.0, "expert_host": 0.0,
                                       "expert_launch_bound": 0, "expert_calls": 0})
        p["gpu"] += e - s
        p["host"] += he - hb
        if s - hb < 0.05 and s > prev_end:
            p["waited"] += s - prev_end
        if r["op"] in EXPERT:
            p["expert_gpu"] += e - s
            p["expert_host"] += he - hb
            p["expert_calls"] += 1
            p["expert_launch_bound"] += s - he < 0.005   # began before the host had issued the call's last launch
        prev_end = max(prev_end, e)
    return out, float(rows[-1]["end_ms"])


print("| layout, rank | pass | GPU ms (step's stream) | host issuing ms | GPU idle waiting for the host ms | "
      "expert GEMMs: GPU / host ms | expert calls the GPU began before their issue ended |")
print("|---|---|---:|---:|---:|---|---:|")
for name in ("1gpu.rank0", "tp2sp.rank0", "tp2sp.rank1", "pp2.rank0", "pp2.rank1"):
    out, end = passes(os.path.join(HERE, "tl_%s.csv.gz" % name))
    for pname in ("fwd", "bwd"):
        p = out.get(pname)
        if not p:
            continue
        print("| %s | %s | %.1f | %.1f | %.1f | %.1f / %.1f | %d of %d |" % (
            name, pname, p["gpu"], p["host"], p["waited"], p["expert_gpu"], p["expert_host"], p["expert_launch_bound"],
            p["expert_calls"]))
