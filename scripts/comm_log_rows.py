#!/usr/bin/env python3
"""Overlay rows intra_us_<collective>:N:BYTES from a `sextant-gpu calibrate --comm` log's tables.

calibrate --comm writes these rows itself since 2026-11-26; an overlay measured before (its log kept in
docs/validation) gets them from that log, the same numbers:
    python3 scripts/comm_log_rows.py LOG GPU RANKS SOURCE >> hwdb/measured/GPU.csv
"""
import sys


def rows(log, gpu, ranks, source):
    out, coll = [], None
    for line in open(log):
        words = line.split()
        if line.startswith('# ') and len(words) == 2 and words[1] in ('all_reduce', 'reduce_scatter', 'all_gather', 'sendrecv'):
            coll = words[1]
            continue
        if line.startswith('#') or not words:
            if not line.startswith('#'):
                coll = None
            continue
        if coll and len(words) >= 8 and words[0].isdigit():
            out.append('%s,intra_us_%s:%d:%s,%.3f,"%s"' % (gpu, coll, ranks, words[0], float(words[4]), source))
    return out


if __name__ == '__main__':
    if len(sys.argv) != 5:
        sys.exit('usage: comm_log_rows.py LOG GPU RANKS SOURCE')
    for r in rows(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]):
        print(r)
