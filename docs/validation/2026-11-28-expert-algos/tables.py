#!/usr/bin/env python3
"""One MoE layer's expert GEMMs by how each expert's algorithm is chosen (dev/cuda/expert_grouped versions 2, 7, 8),
before (runs/: version 7 the 128-row bucket asked at its middle, cublasGemmEx from 64 GFLOP) and after (after/: the
16-row bucket asked at its top), and the steps.  From the repository root:
    python3 docs/validation/2026-11-28-expert-algos/tables.py"""
import collections, glob, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
VERSIONS = {"2": "cublasGemmEx", "7": "validator", "8": "exact shape"}

def bench(path):
    """{pass: {version: us}} of one benchmark log"""
    t = collections.defaultdict(dict)
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 10 and f[0] in ("mixtral", "olmoe") and f[8] in VERSIONS:
            t[f[1]][f[8]] = float(f[9])
    return t

print("one layer's expert GEMMs (fwd, dgrad, wgrad of both projections), us; version 7 over 8 and over 2")
print("%-8s %-22s %9s %9s %9s %8s %8s" % ("call", "case", "v2 ex", "v7 valid.", "v8 exact", "7/8", "7/2"))
for call in ("runs", "after"):
    for path in sorted(glob.glob(os.path.join(HERE, call, "bench-*.log"))):
        t = bench(path)
        sums = {v: sum(p[v] for p in t.values()) for v in VERSIONS}
        case = re.sub(r"^bench-|\.log$", "", os.path.basename(path))
        print("%-8s %-22s %9.1f %9.1f %9.1f %+7.1f%% %+7.1f%%" % (call, case, sums["2"], sums["7"], sums["8"],
              100 * (sums["7"] / sums["8"] - 1), 100 * (sums["7"] / sums["2"] - 1)))
print("\nsteps (median, predicted, error)")
for path in sorted(glob.glob(os.path.join(HERE, "runs", "*.log")) + glob.glob(os.path.join(HERE, "after", "*.log")) +
                   glob.glob(os.path.join(HERE, "after", "heldout", "*.log"))):
    for line in open(path):
        m = re.match(r"step time: median ([0-9.]+) ms .*predicted ([0-9.]+) ms \(([-+0-9.]+%)\)", line)
        if m:
            print("%-32s %9s ms %9s ms %7s" % (os.path.relpath(path, HERE), m.group(1), m.group(2), m.group(3)))
