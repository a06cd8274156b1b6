#!/usr/bin/env python3
"""Which op calls of a profiling step ran beside a collective, and how much longer they took than the same op
in a reference run (SEXTANT_TIMELINE files, validator/train.c).  Usage:
    timeline.py RUN.rank0.csv[.gz] REFERENCE.rank0.csv[.gz]
For each compute op (the step's stream) of RUN: its calls with at least half their time beside a side-stream
op (a collective, the shard add), their mean time against the reference run's mean for that op; the same for
the calls beside nothing; then each side-stream op's calls, their mean time on the stream."""
import csv, gzip, sys
from collections import defaultdict


def load(path):
    f = gzip.open(path, 'rt') if path.endswith('.gz') else open(path)
    rows = [dict(r, s=float(r['start_ms']), e=float(r['end_ms'])) for r in csv.DictReader(f)]
    return rows


def overlap(a, intervals):
    """the part of call a's time that some interval covers (intervals sorted by start, not overlapping much)"""
    t = 0.0
    for s, e in intervals:
        if e <= a['s']: continue
        if s >= a['e']: break
        t += min(e, a['e']) - max(s, a['s'])
    return t


run, ref = load(sys.argv[1]), load(sys.argv[2])
side = sorted((r['s'], r['e']) for r in run if r['side'] == '1' and not r['op'].endswith('_exposed'))
ref_mean = defaultdict(list)
for r in ref:
    if r['side'] == '0': ref_mean[(r['op'], r['pass'])].append(r['e'] - r['s'])
beside, alone = defaultdict(list), defaultdict(list)
for r in run:
    if r['side'] != '0' or r['op'].startswith('dp_') or r['pass'] == 'step': continue
    d = r['e'] - r['s']
    if d <= 0: continue
    (beside if overlap(r, side) >= 0.5 * d else alone)[(r['op'], r['pass'])].append(d)
print('%-22s %4s  %6s %9s %9s  %6s %9s %9s' % ('op', 'pass', 'beside', 'mean ms', 'vs ref', 'alone', 'mean ms', 'vs ref'))
tot = defaultdict(float)
for key in sorted(set(beside) | set(alone), key=lambda k: (k[1], k[0])):
    ref_ms = sum(ref_mean[key]) / len(ref_mean[key]) if ref_mean[key] else float('nan')
    cells = []
    for group, name in ((beside, 'beside'), (alone, 'alone')):
        v = group.get(key, [])
        m = sum(v) / len(v) if v else float('nan')
        cells.append('%6d %9.4f %+8.1f%%' % (len(v), m, 100 * (m / ref_ms - 1)) if v else '%6d %9s %9s' % (0, '-', '-'))
        if v: tot[name + ' extra'] += sum(v) - len(v) * ref_ms
    print('%-22s %4s  %s  %s' % (key[0], key[1], cells[0], cells[1]))
print('time lost against the reference: beside a collective %.2f ms, beside nothing %.2f ms' %
      (tot['beside extra'], tot['alone extra']))
coll = defaultdict(list)
for r in run:
    if r['side'] == '1': coll[(r['op'], r['pass'])].append(r['e'] - r['s'])
for key, v in sorted(coll.items()):
    print('%-34s %4s %5d calls, mean %.4f ms, total %.2f ms' % (key[0], key[1], len(v), sum(v) / len(v), sum(v)))
