#!/usr/bin/env python3
"""overhead.py A.txt [B.txt ...]: ZeRO-2/3's time over the same model's ZeRO-1 run, measured and as each reprice.sh
output prices it (ms), with the mean |error| of those overheads and their signed mean for the dense and the MoE
models apart.  The runs pair by folder."""
import sys

def load(path):
    runs = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 4 and f[0].endswith('.csv'):
            runs[f[0]] = (float(f[1][:-2]), float(f[2][:-2]))
    return runs

tables = [load(p) for p in sys.argv[1:]]
print('%-46s %9s' % ('run', 'measured') + ''.join('%12s' % p.split('/')[-1][:-4] for p in sys.argv[1:]))
errors = [[] for _ in tables]
signed = [{'dense': [], 'moe': []} for _ in tables]
for run in tables[0]:
    folder, name = run.rsplit('/', 1)
    stage = name.split('z')[-1][0] if 'dp2z' in name else ''
    if stage not in ('2', '3'):
        continue
    base = folder + '/' + name.split('dp2z')[0] + 'dp2z1.csv'
    if base not in tables[0]:
        continue
    measured = tables[0][run][0] - tables[0][base][0]
    cells = []
    kind = 'moe' if ('olmoe' in run or 'moe-experts' in run) else 'dense'
    for t, e, sg in zip(tables, errors, signed):
        priced = t[run][1] - t[base][1]
        e.append(abs(priced / measured - 1.0))
        sg[kind].append(priced / measured - 1.0)
        cells.append('%12.2f' % priced)
    print('%-46s %9.2f' % (run, measured) + ''.join(cells))
print('%-46s %9s' % ('mean |error|', '') + ''.join('%11.0f%%' % (100 * sum(e) / len(e)) for e in errors))
for kind in ('dense', 'moe'):
    print('%-46s %9s' % ('signed, ' + kind, '') + ''.join('%+11.0f%%' % (100 * sum(sg[kind]) / len(sg[kind])) for sg in signed))
