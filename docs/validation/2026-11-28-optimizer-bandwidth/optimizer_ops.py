#!/usr/bin/env python3
"""The optimizer op of every recorded H200 step (tests/data and the current reports' CSVs, rank 0, calibrated rows):
measured against the price it was recorded with (the memory-bound efficiency of the device copy, 0.8721) and against
the same price at AdamW's own (0.8191, calibrate --optimizer): the bytes' term scales by 0.8721 / 0.8191, the kernel's
fixed 4.3 us does not.  From the repository root: python3 docs/validation/2026-11-28-optimizer-bandwidth/optimizer_ops.py"""
import csv, glob, statistics

COPY, ADAMW, OVERHEAD = 0.8721, 0.8191, 4.277e-6
before, after, seen = [], [], set()
files = sorted(glob.glob('tests/data/**/*.csv', recursive=True) +
               [f for f in glob.glob('docs/validation/2026-11-2*/**/*.csv', recursive=True) if '/archive/' not in f])
for path in files:
    try:
        rows = list(csv.DictReader(open(path)))
    except (UnicodeDecodeError, csv.Error):
        continue
    for r in rows:
        if r.get('gpu') != 'h200' or r.get('op') != 'optimizer' or r.get('calibrated') != '1' or r.get('rank', '0') != '0':
            continue
        key = (r['measured_s'], r['predicted_s'])   # the same run copied into two reports counts once
        if key in seen:
            continue
        seen.add(key)
        p, m = float(r['predicted_s']), float(r['measured_s'])
        q = (p - OVERHEAD) * COPY / ADAMW + OVERHEAD
        before.append(p / m - 1)
        after.append(q / m - 1)
def line(name, e):
    return '%-7s %d ops: mean |error| %.1f%%, signed %+.1f%%, median %+.1f%%, range %+.1f%% to %+.1f%%' % (
        name, len(e), 100 * statistics.mean(abs(x) for x in e), 100 * statistics.mean(e), 100 * statistics.median(e),
        100 * min(e), 100 * max(e))
print(line('before', before))
print(line('after', after))
