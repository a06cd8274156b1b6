#!/usr/bin/env python3
"""The spread of the power-capped SM clock from chip to chip (docs/model.md, "Clock under the power cap").

For each run of identical work on every GPU (DP, TP, CP layouts; PP's stages differ and are left out), the NVML
samples of scripts' device_sample (smi.csv: one row per GPU per 200 ms) taken while that run went on (between the
previous run's log and its own, run-end-times.txt: the logs' modification times in the call's tar) and while every
GPU drew 450 W or more give each GPU's mean clock; the relative standard deviation pooled over the runs that were
capped (some GPU below the 1980 MHz top clock) is the spread.  Usage: python3 clock_spread.py (from this folder)."""
import csv, math, statistics

def seconds(stamp):
    h, m, s = stamp.strip().split()[1].split(':')
    return int(h) * 3600 + int(m) * 60 + float(s)

def samples(path):
    rows = [(seconds(r[0]), float(r[1].split()[0]), float(r[2].split()[0])) for r in csv.reader(open(path)) if len(r) >= 3]
    groups, cur = [], [rows[0]]
    for r in rows[1:]:
        if r[0] - cur[0][0] < 0.1: cur.append(r)
        else: groups.append(cur); cur = [r]
    groups.append(cur)
    return groups

def runs(folder, gpus):
    groups = samples(folder + '/smi.csv')
    ends = sorted((seconds('x ' + line.split()[0]), line.split()[1].split('/')[-1][:-4])
                  for line in open(folder + '/run-end-times.txt'))
    out, prev = [], None
    for end, name in ends:
        start, prev = (prev if prev else end - 30), end
        if not any(k in name for k in ('dp', 'tp', 'cp')) or 'pp' in name or 'moe' in name:
            continue
        busy = [g for g in groups if len(g) == gpus and start + 2 < g[0][0] < end - 0.5 and all(x[2] > 450 for x in g)]
        if len(busy) < 3: continue
        mhz = [statistics.mean(g[i][1] for g in busy) for i in range(gpus)]
        if max(mhz) < 1975: out.append((name, mhz))
    return out

def third_machine(folder):
    """another 2 x H200 machine (09:59 UTC): smi.csv has the GPU's index, and the two runs (DP 2 ZeRO-1, TP 2 + SP)
    ran back to back, so their busy samples are taken together"""
    by = {}
    for r in csv.reader(open(folder + '/smi.csv')):
        if len(r) < 4: continue
        by.setdefault(r[0].strip()[:-4], {})[int(r[1])] = (float(r[2].split()[0]), float(r[3].split()[0]))
    busy = [v for v in by.values() if len(v) == 2 and all(x[1] > 450 for x in v.values())]
    mhz = [statistics.mean(v[i][0] for v in busy) for i in range(2)]
    return [('third machine: DP 2 ZeRO-1 and TP 2 + SP', mhz)] if max(mhz) < 1975 else []

capped = runs('../2026-11-26-h200x2-calibrated/timed', 2) + runs('layouts', 4) + third_machine('third-machine')
def pooled(rs):
    ss = sum(sum(((x - statistics.mean(m)) / statistics.mean(m)) ** 2 for x in m) for _, m in rs)
    return math.sqrt(ss / sum(len(m) - 1 for _, m in rs))
for name, mhz in capped:
    print(f"{name:44s} {' '.join(f'{x:6.0f}' for x in mhz)}  slowest/mean {min(mhz) / statistics.mean(mhz):.3f}")
print(f"pooled relative sd over {len(capped)} runs: {pooled(capped):.4f}")
for i in range(len(capped)):
    print(f"  leaving out {capped[i][0]}: {pooled(capped[:i] + capped[i + 1:]):.4f}")
