#!/usr/bin/env python3
"""The routed rows' pools against one pool: each run's peak memory error and its pools' reserve and use.

Reads the logs of tests/data/2026-11-28-moe-pools (two pools) and tests/data/2026-11-28-overlap-classes/after (one
pool, the validator before it, another 2 x H200 the same day)."""
import os, re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
SETS = [("one pool", "tests/data/2026-11-28-overlap-classes/after"), ("two pools", "tests/data/2026-11-28-moe-pools")]
LAYOUTS = ["1gpu", "dp2z1", "dp2z2", "dp2z3", "dp2z3rc", "ep2", "ep2z3", "tp2sp", "pp2", "cp2", "cp2ep2"]


def read(path):
    text = open(path).read()
    mem = re.search(r"^memory: peak device use ([0-9.]+) GiB on rank (\d); predicted ([0-9.]+) GiB.*?\(([-+0-9.]+)%\)",
                    text, re.M)
    one = re.search(r"pool\) peaked at ([0-9.]+) GiB reserved, ([0-9.]+) GiB in use", text)
    two = re.search(r"pools peaked at ([0-9.]+) GiB reserved \(kept for the backward ([0-9.]+), in use ([0-9.]+); "
                    r"scratch ([0-9.]+), in use ([0-9.]+)\)", text)
    if two:
        reserved, used = float(two.group(1)), float(two.group(3)) + float(two.group(5))
        pools = "kept %s/%s, scratch %s/%s" % two.group(2, 3, 4, 5)
    else:
        reserved, used, pools = float(one.group(1)), float(one.group(2)), "one %s/%s" % one.group(1, 2)
    return float(mem.group(1)), int(mem.group(2)), float(mem.group(4)), reserved, used, pools


print("| model | layout | one pool: peak GiB (rank), error, reserved - in use | two pools: peak GiB (rank), error, "
      "reserved - in use (each pool reserved/in use) |")
print("|---|---|---|---|")
worst = {}
for model in ["olmoe-4l", "mixtral-2l"]:
    for lay in LAYOUTS:
        cells = []
        for name, d in SETS:
            peak, rank, err, reserved, used, pools = read(os.path.join(ROOT, d, model, lay + ".log"))
            worst[name] = min(worst.get(name, 0.0), err)
            extra = " (%s)" % pools if name == "two pools" else ""
            cells.append("%.3f (%d), %+.1f%%, %.3f%s" % (peak, rank, err, reserved - used, extra))
        print("| %s | %s | %s |" % (model, lay, " | ".join(cells)))
print()
print("worst memory error: " + ", ".join("%s %+.1f%%" % (k, v) for k, v in worst.items()))
print("(two pools: 'in use' is the sum of each pool's own high-water mark, which need not fall at one moment)")
