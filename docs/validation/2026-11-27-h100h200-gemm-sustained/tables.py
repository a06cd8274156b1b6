#!/usr/bin/env python3
"""Every table of this report from its raw files, with the shipped overlays' GEMM tile model (planner/formulas.c
gemm_waves and gemm_tile_wave_s; its three numbers read from hwdb/measured/<gpu>.csv).  From the repository root:
    python3 docs/validation/2026-11-27-h100h200-gemm-sustained/tables.py"""
import csv
import datetime
import math
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
TILE = 128
SPLIT_K_MIN = 256


def overlay(gpu):
    """the tile model's numbers and the clock time regression of hwdb/measured/<gpu>.csv"""
    want = {"gemm_tile_tflops": None, "gemm_tile_us": None, "gemm_fixed_us": None, "sm_count": None,
            "clock_time_factor": None, "clock_time_exponent": None}
    with open(os.path.join(ROOT, "hwdb", "measured", gpu + ".csv")) as f:
        for row in csv.reader(f):
            if len(row) > 2 and row[1] in want:
                want[row[1]] = float(row[2])
    return want


def tile_s(o, m, n, k, batch=1):
    """planner/formulas.c: waves of 128 x 128 tiles on the SMs, K split where the tiles leave SMs idle"""
    sms = o["sm_count"]
    tiles = batch * math.ceil(m / TILE) * math.ceil(n / TILE)
    split = 1
    if tiles < sms:
        split = max(1, min(math.floor(sms / tiles), math.floor(k / SPLIT_K_MIN)))
    waves = math.ceil(tiles * split / sms)
    per_wave = o["gemm_tile_us"] * 1e-6 + 2.0 * TILE * TILE * (k / split) * sms / (o["gemm_tile_tflops"] * 1e12)
    return o["gemm_fixed_us"] * 1e-6 + waves * per_wave


def rows(path):
    """a CSV's rows, its check lines and comments left out, and a header repeated by a program run again into it"""
    with open(path) as f:
        lines = [l for l in f if l[:1] not in " #\n" and "PASS" not in l and "FAIL" not in l]
    return list(csv.DictReader([lines[0]] + [l for l in lines[1:] if l != lines[0]]))


def smi_samples(path):
    out = []
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) < 4 or row[0].strip() != "0":
                continue
            t = datetime.datetime.strptime(row[1].strip(), "%Y/%m/%d %H:%M:%S.%f")
            out.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), float(row[2].split()[0])))
    return out


def pct(model, measured):
    return f"{model:.1f} ({(model - measured) / measured * 100:+.1f}%)"


def grouped_table():
    print("## 1. cuBLAS's grouped GEMM against one GEMM per expert (one H200; call 1)\n")
    print("| model | pass | experts | 1: one stream, us | 2: four streams | 3: cublasGemmGroupedBatchedEx | 3 / 1 | host us of 1 / 3 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    by = {}
    for r in rows(os.path.join(HERE, "h200", "expert_grouped_call1.csv")):
        by.setdefault((r["model"], r["pass"]), {})[r["version"]] = r
    for (model, p), v in by.items():
        g = [float(v[x]["gpu_us"]) for x in "123"]
        h = [float(v[x]["host_us"]) for x in "123"]
        print(f"| {model} | {p} | {v['1']['experts']} | {g[0]:.1f} | {g[1]:.1f} | {g[2]:.1f} | {g[2] / g[0]:.2f} | "
              f"{h[0]:.0f} / {h[2]:.0f} |")
    print()


def clock_table(gpu, folder):
    o = overlay(gpu)
    k, b = o["clock_time_factor"], o["clock_time_exponent"]
    smi = smi_samples(os.path.join(HERE, folder, "grouped_smi.csv"))
    print(f"## 2. Mixtral 8x7B's expert GEMMs of one layer ({gpu}), the tile model at the mean rows\n")
    print(f"| pass | version | measured us | NVML MHz | tile model at the top clock | at NVML's clock, 1/x | "
          f"{k:.3f} x^-{b:.3f} (the overlay) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows(os.path.join(HERE, folder, "grouped_mixtral.csv")):
        if r["version"] == "3":
            continue
        a, e = float(r["t0"]), float(r["t1"])
        s = [c for t, c in smi if a <= t <= e]
        clk = sum(s) / len(s)
        x = clk / 1980.0
        top = int(r["experts"]) * tile_s(o, int(r["m"]), int(r["n"]), int(r["k"])) * 1e6
        us = float(r["gpu_us"])
        print(f"| {r['pass']} | {r['version']} | {us:.1f} | {clk:.0f} | {pct(top, us)} | {pct(top / x, us)} | "
              f"{pct(top * k * x ** -b, us)} |")
    print()


PHASE_RUNS = (("1", "clock_phases_machine1.csv"), ("2", "clock_phases_machine2.csv"), ("3", "clock_phases_machine3.csv"),
              ("4 (TN)", "clock_phases_machine4_tn.csv"))


def phases_table():
    o = overlay("h100-sxm")
    print("## 3. The SM clock by phase (one H100 each), and a GEMM's time at two clocks\n")
    print("| machine | shape | pattern | GEMM phase MHz (min-max) | copy phase MHz | us per GEMM | TFLOP/s |")
    print("|---|---|---|---|---|---:|---:|")
    for name, path in PHASE_RUNS:
        run = rows(os.path.join(HERE, "h100", path))
        for r in run:
            shape = r.get("shape", "8192x8192x8192")
            if (r["phase"] == "copy" and r["pattern"] != "copy_only") or r["pattern"] == "cool_5ms" or \
                    (name in ("3", "4 (TN)") and shape != "8192x8192x8192"):
                continue
            copy = [c for c in run
                    if c.get("shape", "8192x8192x8192") == shape and c["pattern"] == r["pattern"] and c["phase"] == "copy"]
            cm = copy[0]["mean_mhz"] if copy else "-"
            if r["phase"] == "copy":
                print(f"| {name} | {shape} | {r['pattern']} | - | {cm} | - | - |")
            else:
                print(f"| {name} | {shape} | {r['pattern']} | {r['mean_mhz']} ({r['min_mhz']}-{r['max_mhz']}) | {cm} | "
                      f"{r['gemm_us']} | {r['tflops']} |")
    print()
    print("Each shape at the top clock (alternating every 2 ms), capped (alone) and as calibrate times (5 ms batches after")
    print("50 ms idle): the exponent b of t ~ x^-b between the first two, and the top-clock time against the H100")
    print(f"overlay's tile model (x {o['clock_time_factor']:.3f}, its factor at x = 1)\n")
    print("| machine | shape | top: us at MHz | capped: us at MHz | b | cool batches: us at MHz | tile model | tile x factor |")
    print("|---|---|---|---|---:|---|---:|---:|")
    for name, path in PHASE_RUNS:
        by = {}
        for r in rows(os.path.join(HERE, "h100", path)):
            by.setdefault(r.get("shape", "8192x8192x8192"), {})[(r["pattern"], r["phase"])] = r
        for shape, v in by.items():
            top, cap = v.get(("alternate_2ms", "gemm")), v.get(("gemm_only", "gemm"))
            if not top or not cap:
                continue
            t1, c1, t2, c2 = float(top["gemm_us"]), float(top["mean_mhz"]), float(cap["gemm_us"]), float(cap["mean_mhz"])
            b = math.log(t2 / t1) / math.log(c1 / c2)
            m, n, k = map(int, shape.split("x"))
            model = tile_s(o, m, n, k) * 1e6
            cool = v.get(("cool_5ms", "gemm"))
            cool_cell = f"{float(cool['gemm_us']):.1f} at {float(cool['mean_mhz']):.0f}" if cool else "-"
            print(f"| {name} | {shape} | {t1:.1f} at {c1:.0f} | {t2:.1f} at {c2:.0f} | {b:.2f} | {cool_cell} | "
                  f"{pct(model, t1)} | {pct(model * o['clock_time_factor'], t1)} |")
    print()


def calibrate_table(model):
    o = overlay("h100-sxm")
    print(f"## 4. {model}'s GEMM shapes timed by calibrate (cool, top clock) against the shipped tile model\n")
    print("| K | shapes | tile model against calibrate, mean | range |")
    print("|---:|---:|---:|---|")
    errs = {}
    with open(os.path.join(HERE, "h100", f"cal_{model}.csv")) as f:
        for r in csv.reader(f):
            if len(r) < 4 or not r[1].startswith("gemm_us:") or "bias" in r[3]:
                continue
            shape = r[1].split(":")[1]
            if shape.count("x") != 2:
                continue
            m, n, k = map(int, shape.split("x"))
            us = float(r[2])
            errs.setdefault(k, []).append((tile_s(o, m, n, k) * 1e6 - us) / us * 100)
    for k in sorted(errs):
        e = errs[k]
        print(f"| {k} | {len(e)} | {statistics.mean(e):+.1f}% | {min(e):+.1f}..{max(e):+.1f}% |")
    print()


if __name__ == "__main__":
    grouped_table()
    clock_table("h200", "h200")
    clock_table("h100-sxm", "h100")
    phases_table()
    calibrate_table("llama2-13b")
    calibrate_table("llama3-70b")
