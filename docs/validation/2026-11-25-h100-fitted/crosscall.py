#!/usr/bin/env python3
# Each call's overlay against every call's measured steps (all on H100s, 2026-11-25): how far an overlay
# from one lent machine predicts another's.  The planner's own prediction (sextant estimate, the code
# validate runs); the measured step from each CSV's calibrated step row.  run-calibrate-2 ran under the
# hwdb's h200 row, so its overlay is read with that row: an overlay's efficiencies are fractions of its
# row's datasheet figures (its membound_efficiency is the copy over the H200's 4.8 TB/s), so renaming
# its rows to h100-sxm would misread them.
import csv, glob, json, os, subprocess
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(os.path.join(here, "../../.."))
data = os.path.join(root, "tests/data")   # run/ and run-calibrate/ moved there for the tests
calldir = {"run": os.path.join(data, "2026-11-25-h100-fitted-shipped"),
           "run-calibrate": os.path.join(data, "2026-11-25-h100-fitted-calibrate"),
           "run-calibrate-2": os.path.join(here, "run-calibrate-2")}
sextant = os.path.join(root, "build/sextant")
overlays = {"shipped": (os.path.join(root, "hwdb/measured/h100-sxm.csv"), "h100-sxm"),
            "run-calibrate": (os.path.join(data, "2026-11-25-h100-fitted-calibrate/h100-sxm.csv"), "h100-sxm"),
            "run-calibrate-2": (os.path.join(here, "run-calibrate-2/h200.csv"), "h200")}
calls = ["run", "run-calibrate", "run-calibrate-2"]
def measured(path):
    for r in csv.DictReader(open(path)):
        if r["op"] == "step" and r["calibrated"] == "1":
            return float(r["measured_s"])
cache = {}
def predicted(overlay, model, mbs, seq, att):
    key = (overlay, model, mbs, seq, att)
    if key not in cache:
        path, gpu = overlay
        out = subprocess.run([sextant, "estimate", model, "--gpu", gpu, "--mbs", str(mbs), "--gbs", str(mbs),
                              "--seq", str(seq), "--attention", att, "--recompute", "none", "--no-dropout",
                              "--calibration", path, "--format", "json"], capture_output=True, text=True, check=True)
        cache[key] = json.loads(out.stdout)["time"]["step_s"]
    return cache[key]
seqs = {"gpt2": 1024, "gpt2-medium": 1024, "llama3.2-1b": 2048}
print(f"{'overlay':16s} {'measured in':16s} {'within 5%':>9s} {'worst':>7s} {'range':>16s} {'mean |err|':>10s}")
for name, overlay in overlays.items():
    for call in calls:
        errs = []
        for path in sorted(glob.glob(os.path.join(calldir[call], "*_mbs*.csv"))):
            base = os.path.basename(path)[:-4]
            att = "flash" if base.startswith("flash_") else "unfused"
            model, mbs = base.split("_", 1)[1].rsplit("_mbs", 1)
            errs.append(predicted(overlay, model, int(mbs), seqs[model], att) / measured(path) - 1.0)
        inside = sum(abs(e) < 0.05 for e in errs)
        worst = max(errs, key=abs)
        print(f"{name:16s} {call:16s} {inside:5d}/{len(errs):<3d} {100*worst:+6.1f}% {100*min(errs):+6.1f}..{100*max(errs):+5.1f}% "
              f"{100*sum(abs(e) for e in errs)/len(errs):9.2f}%")
