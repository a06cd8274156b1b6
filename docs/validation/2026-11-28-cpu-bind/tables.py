#!/usr/bin/env python3
"""The tables of this report from its raw files, from the repository root:
    python3 docs/validation/2026-11-28-cpu-bind/tables.py
1. SEXTANT_CPU_BIND none against gpu: each run's step, and each rank's host seconds issuing the expert GEMMs of the
   profiling step (OLMoE TP 2 + SP; timelines/, gzipped).  2. validate's "MoE priced at this host's issue" line."""
import csv
import gzip
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "tests", "data", "2026-11-28-cpu-bind")


def step(log):
    m = re.search(r"^step time: median ([0-9.]+) ms .*predicted ([0-9.]+) ms \(([-+0-9.]+%)\)", open(log).read(), re.M)
    return "%s ms (predicted %s, %s)" % m.groups()


def issue(log):
    return re.search(r"([0-9.]+) us of host time to issue each \(the forward's ([0-9.]+)\)", open(log).read()).groups()


print("| run | OLMoE TP 2 + SP step | forward issue us a launch (rank 0) | rank 0 / rank 1 host ms on expert GEMMs | "
      "Mixtral EP 2 step |")
print("|---|---|---:|---|---|")
for d in ("none_1", "gpu_1", "none_2", "gpu_2"):
    hosts = []
    for r in (0, 1):
        rows = csv.DictReader(gzip.open(os.path.join(HERE, "timelines", "%s_tp2sp.rank%d.csv.gz" % (d, r)), "rt"))
        hosts.append(sum(float(x["host_end_ms"]) - float(x["host_begin_ms"]) for x in rows
                         if x["side"] == "0" and x["op"].startswith("expert_") and "swiglu" not in x["op"]))
    print("| %s | %s | %s | %.1f / %.1f | %s |" % (d, step(os.path.join(DATA, "bind", d, "tp2sp.log")),
                                                   issue(os.path.join(DATA, "bind", d, "tp2sp.log"))[1], hosts[0], hosts[1],
                                                   step(os.path.join(DATA, "bind", d, "ep2.log"))))
print()
print("| run | step | forward issue us a launch | priced at this host's issue |")
print("|---|---|---:|---|")
for model, name in (("olmoe-4l", "1gpu"), ("olmoe-4l", "pp2"), ("olmoe-4l", "tp2sp"), ("mixtral-2l", "ep2")):
    log = os.path.join(DATA, "host-line", model, name + ".log")
    line = re.search(r"^MoE priced at this host's issue: .* the step ([0-9.]+) ms \(([-+0-9.]+%)\)", open(log).read(), re.M)
    print("| %s %s | %s | %s | %s ms (%s) |" % (model, name, step(log), issue(log)[1], line.group(1), line.group(2)))
