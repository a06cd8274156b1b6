#!/usr/bin/env python3
"""Peak memory per GPU of the recorded MoE steps (this report's and 2026-11-26-h100x2-ep-messages' runs of the current
validator) against `sextant estimate` with the shipped overlay, for the binary given:
    python3 docs/validation/2026-11-26-moe-launches/memory.py SEXTANT CSV... > FILE
The measured figure is the step row's bytes of the rank that peaked highest; the run's EP is read from its log."""
import csv, json, subprocess, sys, glob, re
S = sys.argv[1]
ZOO = "docs/validation/2026-11-26-moe-launches/zoo_moe_heldout.csv"
files = sys.argv[2:]
tot=0; n=0; out=[]
for f in files:
    rows = [r for r in csv.DictReader(open(f)) if r['op'] == 'step' and r['calibrated'] == '1']
    r = max(rows, key=lambda r: float(r['measured_bytes'] or 0))
    log = f[:-4] + '.log'
    ep = 1
    try:
        m = re.search(r"expert parallelism (\d+)", open(log).read()); ep = int(m.group(1)) if m else 1
    except OSError: pass
    cmd = [S, "estimate", r['model'], "--models", ZOO, "--gpu", r['gpu'], "--gpus", r['gpus'], "--tp", r['tp'], "--pp", r['pp'],
           "--dp", r['dp'], "--ep", str(ep), "--mbs", r['mbs'], "--gbs", r['gbs'], "--seq", r['seq'], "--recompute", r['recompute'],
           "--zero", r['zero'], "--attention", "sextant", "--no-dropout", "--format", "json",
           "--calibration", "hwdb/measured/%s.csv" % r['gpu']]
    d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    pred = d['memory']['total']; meas = float(r['measured_bytes'])
    e = pred / meas - 1; tot += abs(e); n += 1
    out.append("%-60s ep %d  measured %.3f GiB  predicted %.3f  %+.1f%%" % (f[-60:], ep, meas / 2**30, pred / 2**30, 100 * e))
print("\n".join(out)); print("mean |error| %.2f%%" % (100 * tot / n))
