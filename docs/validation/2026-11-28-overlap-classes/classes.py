#!/usr/bin/env python3
"""How much each kind of compute slowed beside ZeRO-3's collectives in the steps themselves.

For each model, every compute call of rank 0's ZeRO-3 profiling step is matched with the same call (op, pass,
occurrence) of its ZeRO-1 step on the same machine, and the seconds of it that a DP collective (an all-gather or
reduce-scatter on the communication stream) overlapped are counted.  Per kind of op and pass: the ZeRO-1 time, the
difference, the overlapped seconds, and a least-squares fit dt = a t1 + r ov (a: what moved without a collective, the
clock; r: the loss per overlapped second), with sc = r / (1 - r), the slowdown in calibrate's terms
(t_beside / t_alone - 1).  Run from the repository root:

    python3 docs/validation/2026-11-28-overlap-classes/classes.py
"""
import collections
import csv
import gzip
import os

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = [(m, os.path.join(HERE, "timelines", m + ".tl_dp2z1.rank0.csv.gz"),
         os.path.join(HERE, "timelines", m + ".tl_dp2z3.rank0.csv.gz"))
        for m in ("olmoe-4l", "mixtral-2l", "olmo-1b-8l", "yi-6b-6l")]
H100 = os.path.join(HERE, "..", "2026-11-26-h100x2-zero-order", "timeline")
RUNS.append(("llama3.2-3b (2 x H100, 2026-11-26)", os.path.join(H100, "tl_llama3b_z1.rank0.csv.gz"),
             os.path.join(H100, "tl_llama3b_z3.rank0.csv.gz")))
GEMMS = ("qkv", "attn_out", "mlp_up", "mlp_down", "mlp_gate", "lm_head", "router")


def kind(op):
    if op.startswith("attention"):
        return "attention"
    if op.startswith(("expert_up", "expert_down")):
        return "expert GEMM"
    base = op.replace("_dgrad", "").replace("_wgrad", "")
    return "GEMM" if base.startswith(GEMMS) else "memory-bound"


def load(path):
    compute, coll = [], []
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            s, e = float(r["start_ms"]), float(r["end_ms"])
            if r["side"] == "1":
                if "allgather" in r["op"] or "reduce_scatter" in r["op"]:
                    coll.append((s, e))
            elif r["pass"] in ("fwd", "bwd", "recompute"):
                compute.append((r["op"], r["pass"], s, e))
    return compute, sorted(coll)


def overlapped(s, e, coll):
    t = 0.0
    for a, b in coll:
        if b <= s:
            continue
        if a >= e:
            break
        t += min(e, b) - max(s, a)
    return t


def calls(compute):
    seen, out = collections.Counter(), {}
    for op, p, s, e in compute:
        out[(op, p, seen[(op, p)])] = (s, e)
        seen[(op, p)] += 1
    return out


def main():
    for name, z1, z3 in RUNS:
        a, _ = load(z1)
        b_list, coll = load(z3)
        a, b = calls(a), calls(b_list)
        rows = collections.defaultdict(list)
        for key, (s, e) in b.items():
            if key in a:
                t1 = a[key][1] - a[key][0]
                rows[(kind(key[0]), key[1])].append((t1, (e - s) - t1, overlapped(s, e, coll)))
        print(f"\n{name}")
        print(f"  {'kind':14s} {'pass':4s} {'calls':>5s} {'ZeRO-1 ms':>9s} {'dt ms':>7s} {'beside ms':>9s}   a       r      sc")
        for (k, p), x in sorted(rows.items()):
            t1, dt, ov = (sum(v[i] for v in x) for i in range(3))
            s11 = sum(v[0] * v[0] for v in x)
            s12 = sum(v[0] * v[2] for v in x)
            s22 = sum(v[2] * v[2] for v in x)
            b1 = sum(v[0] * v[1] for v in x)
            b2 = sum(v[2] * v[1] for v in x)
            det = s11 * s22 - s12 * s12
            if ov < 0.05 * (t1 + dt) or abs(det) < 1e-12:
                print(f"  {k:14s} {p:4s} {len(x):5d} {t1:9.2f} {dt:+7.2f} {ov:9.2f}   (beside for under 5% of its time)")
                continue
            fa, r = (s22 * b1 - s12 * b2) / det, (s11 * b2 - s12 * b1) / det
            print(f"  {k:14s} {p:4s} {len(x):5d} {t1:9.2f} {dt:+7.2f} {ov:9.2f}   {fa:+.3f} {r:6.3f} {r / (1 - r):6.3f}")


if __name__ == "__main__":
    main()
