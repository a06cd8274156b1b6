#!/usr/bin/env python3
"""bf16 against fp8 training steps, from the op-by-op tables of `sextant-gpu train` in raw/ (the profiling step:
each op between two CUDA events, the FP8 GEMMs with their amax and cast kernels inside).  Run from this folder:
    python3 where.py > where.txt

Error = predicted / measured - 1 (negative: the planner too fast).  Ratio = fp8 throughput / bf16 throughput at
the same work (the same model FLOPs per step in both) = bf16 step time / fp8 step time.

The bytes section is an estimate from the code, not a measurement: validator/fp8.c's cast() runs, for EACH operand
of EACH FP8 GEMM, sx_fp8_amax (reads the bf16 tensor, 2 bytes an element) and sx_fp8_cast (reads it again, 2 bytes,
writes 1 byte plain or transposed): 5 bytes an element.  forward: W and x (plain); dgrad: W (transposed) and dy
(plain); wgrad: x (transposed) and dy (transposed).  The planner's Transformer Engine recipe (planner/formulas.c,
fp8_cast_bytes and fp8_weight_cast_bytes): the weight once per step, 4 bytes (read 2, write plain 1 + transposed 1);
x once per micro-batch in the forward, 4 bytes, or 2 where a norm wrote it in FP8 (qkv, mlp_up); dy once in the
dgrad, 4 bytes; the wgrad nothing."""
import re

MODELS = {
    # name: layers, tokens per micro-batch, {linear: (in, out)}
    "gpt2-medium": (24, 16 * 1024, {"qkv": (1024, 3 * 1024), "attn_out": (1024, 1024), "mlp_up": (1024, 4096),
                                     "mlp_down": (4096, 1024)}),
    "llama3.2-1b": (16, 4 * 2048, {"qkv": (2048, 2048 + 2 * 8 * 64), "attn_out": (2048, 2048),
                                    "mlp_up": (2048, 2 * 8192), "mlp_down": (8192, 2048)}),
    "llama3.2-3b": (28, 2 * 4096, {"qkv": (3072, 3072 + 2 * 8 * 128), "attn_out": (3072, 3072),
                                    "mlp_up": (3072, 2 * 8192), "mlp_down": (8192, 3072)}),
}
LINEARS = ("qkv", "attn_out", "mlp_up", "mlp_down")
PASSES = (("", "fwd"), ("_dgrad", "dgrad"), ("_wgrad", "wgrad"))
NORM_FED = ("qkv", "mlp_up")


def parse(path):
    ops, head = {}, {}
    for line in open(path):
        m = re.match(r"^(\S+)\s+(fwd|bwd|step|all)\s+([-\d.]+)\s+([-\d.]+)\s+([-+\d.]+)%", line)
        if m:
            ops[m.group(1)] = (float(m.group(3)), float(m.group(4)))
        m = re.match(r"^step time: median ([\d.]+) ms .* predicted ([\d.]+) ms", line)
        if m:
            head["step"] = (float(m.group(2)), float(m.group(1)))
        m = re.match(r"^power: (\d+) W and (\d+) MHz", line)
        if m:
            head["power"] = (int(m.group(1)), int(m.group(2)))
        m = re.match(r"^tokens/s (\d+)", line)
        if m:
            head["tokens"] = int(m.group(1))
    return ops, head


def err(p, m):
    return 100.0 * (p / m - 1.0)


def cls(op):
    if op.startswith(LINEARS):
        return "linear GEMMs (FP8 in the fp8 run)"
    if op.startswith("lm_head"):
        return "lm_head (bf16 in both)"
    if op in ("attention", "attention_bwd"):
        return "attention (flash)"
    if op in ("optimizer", "zero_grads", "fp8_weight_cast"):
        return "optimizer, zero_grads, fp8_weight_cast"
    return "memory-bound"


CLASSES = ["linear GEMMs (FP8 in the fp8 run)", "lm_head (bf16 in both)", "attention (flash)", "memory-bound",
           "optimizer, zero_grads, fp8_weight_cast"]

print("# Steps\n")
print("| model | bf16 measured | fp8 measured | ratio (fp8 / bf16 throughput) | bf16 predicted (error) | "
      "fp8 predicted (error) | predicted ratio | SM clock bf16 / fp8 | power bf16 / fp8 |")
print("|---|---|---|---|---|---|---|---|---|")
data = {}
for name in MODELS:
    b, bh = parse(f"raw/{name}_bf16.log")
    f, fh = parse(f"raw/{name}_fp8.log")
    data[name] = (b, f, bh, fh)
    (bp, bm), (fp, fm) = bh["step"], fh["step"]
    print(f"| {name} | {bm:.2f} ms | {fm:.2f} ms | **{bm / fm:.3f}** | {bp:.2f} ms ({err(bp, bm):+.1f}%) | "
          f"{fp:.2f} ms ({err(fp, fm):+.1f}%) | {bp / fp:.3f} | {bh['power'][1]} / {fh['power'][1]} MHz | "
          f"{bh['power'][0]} / {fh['power'][0]} W |")
print()

for name in MODELS:
    b, f, bh, fh = data[name]
    print(f"# {name}: by class (profiling step, sums of the op rows)\n")
    print("| class | bf16 predicted | bf16 measured | fp8 predicted | fp8 measured | fp8 - bf16 measured |")
    print("|---|---|---|---|---|---|")
    tot = [0.0] * 4
    for c in CLASSES:
        s = [sum(d[o][i] for o in d if o != "step" and cls(o) == c) for d, i in ((b, 0), (b, 1), (f, 0), (f, 1))]
        tot = [t + x for t, x in zip(tot, s)]
        print(f"| {c} | {s[0]:.2f} | {s[1]:.2f} | {s[2]:.2f} | {s[3]:.2f} | {s[3] - s[1]:+.2f} |")
    print(f"| sum of ops | {tot[0]:.2f} | {tot[1]:.2f} | {tot[2]:.2f} | {tot[3]:.2f} | {tot[3] - tot[1]:+.2f} |")
    print(f"| step row | {b['step'][0]:.2f} | {b['step'][1]:.2f} | {f['step'][0]:.2f} | {f['step'][1]:.2f} | "
          f"{f['step'][1] - b['step'][1]:+.2f} |")
    print()

    layers, N, lin = MODELS[name]
    print(f"## {name}: linear-layer GEMMs, ms over the {layers} layers (fp8 measured includes its amax and cast kernels)\n")
    print("| GEMM | bf16 measured | fp8 measured | fp8 / bf16 | fp8 - bf16 | fp8 predicted | sextant-gpu cast bytes | "
          "TE-recipe cast bytes (planner) |")
    print("|---|---|---|---|---|---|---|---|")
    tb = tf = tp = ours_all = te_all = 0.0
    per_pass = {p: [0.0, 0.0, 0.0] for _, p in PASSES}
    for l in LINEARS:
        i, o = lin[l]
        W, X, DY = i * o, N * i, N * o
        for suffix, p in PASSES:
            op = l + suffix
            mb, mf, pf = b[op][1], f[op][1], f[op][0]
            ours = 5.0 * {"fwd": W + X, "dgrad": W + DY, "wgrad": X + DY}[p] * layers
            te = {"fwd": (2.0 if l in NORM_FED else 4.0) * X, "dgrad": 4.0 * DY, "wgrad": 0.0}[p] * layers
            tb, tf, tp, ours_all, te_all = tb + mb, tf + mf, tp + pf, ours_all + ours, te_all + te
            per_pass[p][0] += mb
            per_pass[p][1] += mf
            per_pass[p][2] += ours
            print(f"| {op} | {mb:.2f} | {mf:.2f} | {mf / mb:.2f} | {mf - mb:+.2f} | {pf:.2f} | {ours / 1e9:.2f} GB | "
                  f"{te / 1e9:.2f} GB |")
    te_w = 4.0 * sum(i * o for i, o in lin.values()) * layers
    print(f"| **total** | **{tb:.2f}** | **{tf:.2f}** | **{tf / tb:.2f}** | **{tf - tb:+.2f}** | {tp:.2f} | "
          f"{ours_all / 1e9:.2f} GB | {te_all / 1e9:.2f} GB + weights once per step {te_w / 1e9:.2f} GB |")
    print()
    print("by pass (bf16 measured, fp8 measured, fp8 - bf16, cast bytes): " + "; ".join(
        f"{p} {v[0]:.2f} / {v[1]:.2f} ms ({v[1] - v[0]:+.2f}), {v[2] / 1e9:.2f} GB" for p, v in per_pass.items()))
    print()
    # Derived, not measured: what the casts would cost at a bandwidth, and what the GEMMs alone would take at
    # calibrate's FP8/bf16 time ratio (0.538 over its shapes of 10 GFLOP or more; docs/validation/
    # 2026-11-26-h100-fp8-calibrate).
    for bw in (3.0, 2.0):
        print(f"sextant-gpu's cast bytes at {bw:.1f} TB/s: {ours_all / bw / 1e9:.1f} ms; the TE recipe's "
              f"({(te_all + te_w) / 1e9:.2f} GB) at {bw:.1f} TB/s: {(te_all + te_w) / bw / 1e9:.1f} ms")
    gemm_only = 0.538 * tb
    left = tf - gemm_only
    print(f"derived: FP8 GEMMs alone at 0.538 x the bf16 measured {gemm_only:.1f} ms; fp8 measured {tf:.1f} ms leaves "
          f"{left:.1f} ms for the casts: {ours_all / 1e9:.1f} GB in {left:.1f} ms = {ours_all / left / 1e9:.2f} TB/s "
          f"effective; expected at 3.0 TB/s: fp8 linear total {gemm_only + ours_all / 3e9:.1f} ms "
          f"({gemm_only + ours_all / 3e9 - tb:+.1f} ms on bf16)")
    print()
