#!/usr/bin/env python3
"""Every table of this report's README from its raw files (and, for the last, the overlay the fix replaced, read
with git from the commit before it).  From the repository root or anywhere:
    python3 docs/validation/2026-11-27-h100-calibrate-operands/tables.py"""
import csv
import glob
import gzip
import os
import re
import statistics as st
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BEFORE = "2154b94"  # the commit whose hwdb/measured/h100-sxm.csv held the table timed on NaN operands


def read(path):
    with open(path) as f:
        return f.read()


def clock_phases_rows(text):
    """8192^3 rows of one clock_phases log: pattern -> (NVML MHz, us)"""
    rows = {}
    for line in text.splitlines():
        p = line.split(",")
        if len(p) == 11 and p[0] == "8192x8192x8192" and p[4] == "gemm":
            rows[p[1]] = (float(p[6]), float(p[9]))
    return rows


def table_clock_phases():
    print("## 8192^3 in clock_phases (us, NVML MHz in brackets; 0 MHz: no sampler)\n")
    print("| folder | run | cool_first (calibrate's batches, before other work) | cool_5ms | alternate_2ms (top clock) | gemm_only (capped) |")
    print("|---|---|---:|---:|---:|---:|")
    for folder in ("poll", "data", "kernels", "state", "context", "fixed"):
        for path in sorted(glob.glob(os.path.join(HERE, folder, "cp_*.log"))):
            r = clock_phases_rows(read(path))
            cell = lambda k: "%.1f (%.0f)" % (r[k][1], r[k][0]) if k in r else "-"
            print("| %s | %s | %s | %s | %s | %s |" % (folder, os.path.basename(path)[3:-4], cell("cool_first"),
                                                       cell("cool_5ms"), cell("alternate_2ms"), cell("gemm_only")))
    print()


def table_calibrate_8192():
    print("## calibrate's own timing of 8192^3 (llama3-70b attn_out at 8192 tokens), before the fix\n")
    print("| folder | fwd us | dgrad us | wgrad us | probe MHz |")
    print("|---|---:|---:|---:|---|")
    for folder in ("data", "kernels"):
        for line in read(os.path.join(HERE, folder, "calibrate.log")).splitlines():
            if re.match(r"^llama3-70b +attn_out +8192 +8192 +8192 ", line):
                p = line.split()
                print("| %s | %s | %s | %s | %s |" % (folder, p[5], p[6], p[7], " ".join(p[11:])))
    print()


def table_kernels():
    print("## the kernel cuBLAS ran for 8192^3 (cuBLASLt trace, level 2): calls per algorithm\n")
    pat = re.compile(r"Adesc=\[type=R_16BF rows=8192 cols=8192 ld=8192\].*Bdesc=\[type=R_16BF rows=8192 cols=8192 "
                     r"ld=8192\].*Cdesc=\[type=R_16BF rows=8192 cols=8192")
    for name in ("lt_clock_phases.log.gz", "lt_calibrate.log.gz"):
        count = {}
        with gzip.open(os.path.join(HERE, "kernels", name), "rt") as f:
            for line in f:
                if not pat.search(line):
                    continue
                desc = re.search(r"computeDesc=\[([^\]]*)\] algo=\[([^\]]*)\]", line)
                ws = re.search(r"workSpaceSizeInBytes=(\d+)", line)
                key = "%s; %s; workspace %s" % (desc.group(1), desc.group(2), ws.group(1))
                count[key] = count.get(key, 0) + 1
        print("- `%s`:" % name)
        for k, n in sorted(count.items(), key=lambda kv: -kv[1]):
            print("  - %d x %s" % (n, k))
    print()


def table_steps():
    print("## training steps by the sampler's polling (SEXTANT_POWER_POLL_MS; poll/)\n")
    print("| run | measured ms | predicted ms (overlay of the day) | error |")
    print("|---|---:|---:|---:|")
    for path in sorted(glob.glob(os.path.join(HERE, "poll", "*.log"))):
        if os.path.basename(path).startswith("cp_"):
            continue
        for line in read(path).splitlines():
            if re.match(r"^step +all ", line):
                p = line.split()
                print("| %s | %s | %s | %s |" % (os.path.basename(path)[:-4], p[3], p[2], p[4]))
    print()


def overlay_rows(text):
    rows = {}
    for r in csv.reader(l for l in text.splitlines() if l and not l.startswith("#")):
        if len(r) >= 4 and r[0] == "h100-sxm":
            rows[r[1]] = r
    return rows


def table_fixed_against_before():
    print("## calibrate with scratch_refresh (fixed/calibrate.csv) against the table it replaced (%s)\n" % BEFORE)
    old = overlay_rows(subprocess.run(["git", "-C", ROOT, "show", BEFORE + ":hwdb/measured/h100-sxm.csv"],
                                      capture_output=True, text=True, check=True).stdout)
    new = overlay_rows(read(os.path.join(HERE, "fixed", "calibrate.csv")))
    print("| rows | shapes in both | median new / old | 10th-90th percentile | >= 10 GFLOP: shapes, median |")
    print("|---|---:|---:|---|---|")
    for prefix in ("gemm_us:", "flash_fwd_us:", "flash_bwd_us:", "unfused_fwd_us:", "unfused_bwd_us:"):
        keys = [k for k in new if k.startswith(prefix) and k in old]
        ratio = sorted(float(new[k][2]) / float(old[k][2]) for k in keys)
        big = ""
        if prefix == "gemm_us:":
            def flops(k):
                m, n, kk = (float(v) for v in k[len(prefix):].split("x"))
                return 2.0 * m * n * kk
            b = sorted(float(new[k][2]) / float(old[k][2]) for k in keys if flops(k) >= 1e10)
            big = "%d, %.3f" % (len(b), st.median(b))
        print("| %s | %d | %.3f | %.3f-%.3f | %s |" % (prefix[:-1], len(keys), st.median(ratio), ratio[len(ratio) // 10],
                                                      ratio[9 * len(ratio) // 10], big))
    print()
    print("| key | before | calibrate with the fix |")
    print("|---|---:|---:|")
    for k in ("gemm_efficiency", "gemm_half_gflop", "power_static_w", "energy_gemm_pj_per_flop", "energy_pj_per_byte"):
        print("| %s | %s | %s |" % (k, old[k][2], new[k][2]))
    print()


table_clock_phases()
table_calibrate_8192()
table_kernels()
table_steps()
table_fixed_against_before()
