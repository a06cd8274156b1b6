#!/usr/bin/env python3
"""Per-op-class sums of the `sextant-gpu ops` CSVs (predicted against measured, error = predicted / measured - 1,
negative = the planner predicts too fast), as the README's tables give them.  Run from this folder:
    python3 classes.py > classes.txt

raw/ holds the rerun (sextant-gpu at 37333f9, the ops fixes); raw/first-run-dcd79cf/ the first run (before them).

Classes: GEMM (qkv, attn_out, mlp_up, mlp_down, lm_head: forward, dgrad, wgrad); attention forward and attention
backward (unfused: cuBLAS batched GEMMs around the causal softmax), each its own class; memory-bound (norms and
their backward, rope, residuals, swiglu, embedding and its backward, cross_entropy); optimizer (AdamW and
zero_grads).  The final 'step' row is not summed, only checked against the class sums.  Ops whose measured time is
nan (the kernel refused its arguments) are counted, named, and left out of both sums, as `ops` leaves them out of
its step row."""
import csv
import math

RUNS = ["llama3-8b_mbs1_seq4096", "llama3-8b_mbs1_seq8192", "llama2-13b_mbs1_seq4096", "llama3-70b_mbs1_seq2048"]
ORDER = ["GEMM", "attention fwd", "attention bwd", "memory-bound", "optimizer"]
LINEARS = ("qkv", "attn_out", "mlp_up", "mlp_down", "lm_head")


def op_class(op):
    base = op.split("@")[0]
    if base.startswith(LINEARS):
        return "GEMM"
    if base == "attention":
        return "attention fwd"
    if base == "attention_bwd":
        return "attention bwd"
    if base in ("optimizer", "zero_grads"):
        return "optimizer"
    return "memory-bound"


def err(p, m):
    return 100.0 * (p / m - 1.0)


def load(folder, run):
    rows = list(csv.DictReader(open(f"{folder}/{run}.csv")))
    sums = {c: [0.0, 0.0] for c in ORDER}
    by_op, nan_rows, step = {}, [], None
    for r in rows:
        p, m = float(r["predicted_s"]), float(r["measured_s"])
        if r["op"] == "step":
            step = (p, m)
            continue
        if math.isnan(m):
            nan_rows.append((r["op"], p))
            continue
        by_op[r["op"]] = (p, m)
        sums[op_class(r["op"])][0] += p
        sums[op_class(r["op"])][1] += m
    tp, tm = sum(v[0] for v in sums.values()), sum(v[1] for v in sums.values())
    assert abs(tp / step[0] - 1) < 1e-6 and abs(tm / step[1] - 1) < 1e-6, (folder, run)
    return step, sums, by_op, nan_rows


def summary(name, e):
    print(f"{name}: mean |error| {sum(map(abs, e)) / len(e):.2f}%, mean signed {sum(e) / len(e):+.2f}%, "
          f"worst {max(e, key=abs):+.2f}%")


def report(folder, title, detail):
    print(f"# {title} ({folder}/)\n")
    steps, rest = [], {}
    for run in RUNS:
        step, sums, by_op, nan_rows = load(folder, run)
        rest[run] = (step, sums, by_op)
        steps.append(err(*step))
        gap = step[0] - step[1]
        print(f"## {run}: step (sum of ops) predicted {1e3 * step[0]:.2f} ms, measured {1e3 * step[1]:.2f} ms, "
              f"{err(*step):+.1f}% (gap {1e3 * gap:+.2f} ms)\n")
        print(f"nan rows (left out of both sums): {len(nan_rows)}"
              + (": " + ", ".join(f"{o} (predicted {1e3 * p:.3f} ms)" for o, p in nan_rows) if nan_rows else ""))
        print()
        print("| class | predicted ms | measured ms | error | predicted - measured, ms | % of measured step | share of the gap |")
        print("|---|---|---|---|---|---|---|")
        for c in ORDER:
            p, m = sums[c]
            e = f"{err(p, m):+.1f}%" if m > 1e-5 else "not timed"
            print(f"| {c} | {1e3 * p:.2f} | {1e3 * m:.2f} | {e} | {1e3 * (p - m):+.2f} | "
                  f"{100 * (p - m) / step[1]:+.2f}% | {100 * (p - m) / gap:.0f}% |")
        print()
        if not detail:
            continue
        parts = []
        for lin in LINEARS:
            p = sum(by_op[lin + s][0] for s in ("", "_dgrad", "_wgrad"))
            m = sum(by_op[lin + s][1] for s in ("", "_dgrad", "_wgrad"))
            parts.append(f"{lin} {err(p, m):+.1f}% ({1e3 * (p - m):+.2f} ms)")
        for s, name in (("", "forward"), ("_dgrad", "dgrad"), ("_wgrad", "wgrad")):
            p = sum(by_op[lin + s][0] for lin in LINEARS)
            m = sum(by_op[lin + s][1] for lin in LINEARS)
            parts.append(f"{name} {err(p, m):+.1f}%")
        print("GEMMs by linear and pass: " + ", ".join(parts))
        mb = {}
        for op, (p, m) in by_op.items():
            if op_class(op) not in ("memory-bound", "optimizer"):
                continue
            k = next((k for k in ("norm_bwd", "norm", "rope", "residual", "swiglu", "embedding") if k in op), op)
            k = {"norm": "norm forward", "norm_bwd": "norm backward", "embedding": "embedding fwd+bwd"}.get(k, k)
            mb.setdefault(k, [0.0, 0.0])
            mb[k][0] += p
            mb[k][1] += m
        print("memory-bound and optimizer by kind: " + ", ".join(
            f"{k} {err(p, m):+.1f}% ({1e3 * p:.2f} / {1e3 * m:.2f} ms)" for k, (p, m) in mb.items()))
        top = sorted(by_op.items(), key=lambda kv: -abs(kv[1][0] - kv[1][1]))[:5]
        print("5 largest |predicted - measured|: " + "; ".join(
            f"{o} {1e3 * (p - m):+.2f} ms ({err(p, m):+.1f}%)" for o, (p, m) in top))
        print()
    summary(f"{title}, step (sum of ops)", steps)
    for c in ORDER:
        e = [err(*rest[r][1][c]) for r in RUNS if rest[r][1][c][1] > 1e-5]
        if len(e) == len(RUNS):
            summary(f"  class {c}", e)
    print()
    return rest


rerun = report("raw", "Rerun, sextant-gpu at 37333f9", True)

print("# Rerun, over the four runs together\n")
gap = sum(rerun[r][0][0] - rerun[r][0][1] for r in RUNS)
print(f"summed gap (predicted - measured) {1e3 * gap:+.2f} ms")
for c in ORDER:
    g = sum(rerun[r][1][c][0] - rerun[r][1][c][1] for r in RUNS)
    print(f"  {c}: {1e3 * g:+.2f} ms, {100 * g / gap:.0f}% of it")
agg = {}
for r in RUNS:
    for op, (p, m) in rerun[r][2].items():
        agg[op] = agg.get(op, 0.0) + (p - m)
top = sorted(agg.items(), key=lambda kv: -abs(kv[1]))[:8]
print("largest |summed predicted - measured| over the four runs: " + "; ".join(f"{o} {1e3 * g:+.2f} ms" for o, g in top))
print()
first = report("raw/first-run-dcd79cf", "First run, sextant-gpu at dcd79cf", False)

print("# Measured GEMM class, rerun against first run (GEMM and forward-attention code unchanged between the two binaries; the same kind of card, gpu.txt identical, 12 minutes apart)\n")
for run in RUNS:
    a, b = first[run][1]["GEMM"][1], rerun[run][1]["GEMM"][1]
    fa, fb = first[run][1]["attention fwd"][1], rerun[run][1]["attention fwd"][1]
    print(f"{run}: GEMM measured {1e3 * a:.2f} -> {1e3 * b:.2f} ms ({100 * (b / a - 1):+.1f}%); "
          f"attention fwd {1e3 * fa:.2f} -> {1e3 * fb:.2f} ms ({100 * (fb / fa - 1):+.1f}%)")
