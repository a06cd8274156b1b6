# Step-level fit, out of sample: the power model's attention energy and clock exponent chosen on the six GPT-2
# 124M runs of a run directory (unfused and fused, micro-batch 8/16/32), then scored on the twelve others
# (GPT-2 350M, the LLaMA-style 1.24B).  Everything else as calibrate --power-model measured it.
# From the repository root: python3 crossval.py RUNDIR
import csv, re, subprocess, sys

rd = sys.argv[1]
keys = {"g": "clock_energy_exponent", "eA": "energy_attention_pj_per_flop"}
specs = [("gpt2", 8, 1024), ("gpt2", 16, 1024), ("gpt2", 32, 1024), ("gpt2-medium", 4, 1024), ("gpt2-medium", 8, 1024),
         ("gpt2-medium", 16, 1024), ("llama3.2-1b", 1, 2048), ("llama3.2-1b", 2, 2048), ("llama3.2-1b", 4, 2048)]


def overlay(values, path):
    with open(path, "w") as out:
        for line in open(rd + "/h100-sxm.csv"):
            f = line.split(",", 3)
            for k, v in values.items():
                if len(f) > 2 and f[1] == keys[k]:
                    f[2] = str(v)
                    line = ",".join(f)
            out.write(line)


def errors(path):
    res = {}
    for att, prefix in (("unfused", "train"), ("flash", "flash")):
        for m, b, s in specs:
            row = [r for r in csv.DictReader(open(f"{rd}/{prefix}_{m}_mbs{b}.csv")) if r["op"] == "step" and r["calibrated"] == "1"][0]
            out = subprocess.run(["build/sextant", "estimate", m, "--gpu", "h100-sxm", "--mbs", str(b), "--gbs", str(b), "--seq",
                                  str(s), "--attention", att, "--recompute", row["recompute"], "--no-dropout", "--calibration",
                                  path], capture_output=True, text=True).stdout
            step = [float(l.split()[1]) for l in out.splitlines() if l.strip().startswith("step ")][0]
            res[(att, m, b)] = 100 * (step / float(row["measured_s"]) - 1)
    return res


results = []
for g in (0.5, 1.0, 1.5, 2.0):
    for ea in (2.6, 3.5, 4.5, 6.0):
        overlay({"g": g, "eA": ea}, "/tmp/sextant-crossval.csv")
        r = errors("/tmp/sextant-crossval.csv")
        train = [abs(v) for k, v in r.items() if k[1] == "gpt2"]
        test = [abs(v) for k, v in r.items() if k[1] != "gpt2"]
        results.append((sum(train) / len(train), g, ea, sum(test) / len(test), max(test)))
        print(f"exponent {g:.1f}  attention {ea:.1f} pJ/FLOP: GPT-2 124M mean |error| {results[-1][0]:.2f}%;"
              f" the others mean {results[-1][3]:.2f}%, worst {results[-1][4]:.1f}%")
best = min(results)
print(f"chosen on GPT-2 124M: exponent {best[1]:.1f}, attention {best[2]:.1f} pJ/FLOP -> the other 12 runs: mean |error| "
      f"{best[3]:.2f}%, worst {best[4]:.1f}%")
