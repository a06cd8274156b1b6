#!/usr/bin/env python3
"""The tables of README.md from tests/data/2026-11-28-expert-tile-waste (dev/cuda/expert_grouped.cu, versions 4 and 6):
the rows' unevenness (cv 0.5 against every expert the mean rows) and rows off the 128-row tile, per layer and per GEMM,
with the SM clock nvidia-smi read during each timing.  Run from the repository root."""
import csv, datetime, glob, os, statistics

DATA = 'tests/data/2026-11-28-expert-tile-waste'
PASSES = ['up_fwd', 'down_fwd', 'up_dgrad', 'down_dgrad', 'up_wgrad', 'down_wgrad']


def smi_samples():
    out = []
    for r in list(csv.reader(open(os.path.join(DATA, 'smi.csv'))))[1:]:
        try:
            t = datetime.datetime.strptime(r[0].strip(), '%Y/%m/%d %H:%M:%S.%f')
            out.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), float(r[1].split()[0])))
        except (ValueError, IndexError):
            pass
    return out


def load():
    smi = smi_samples()
    timings = {}
    for path in sorted(glob.glob(os.path.join(DATA, '*.csv'))):
        if path.endswith('smi.csv'):
            continue
        # the check's lines (two leading spaces) share stdout with the CSV
        for r in csv.DictReader(l for l in open(path) if not l.startswith(' ')):
            t0, t1 = float(r['t0']), float(r['t1'])
            mhz = [c for t, c in smi if t0 - 0.05 <= t <= t1 + 0.05]
            key = (r['model'], r['pass'], int(r['rows_mean']), float(r['cv']), int(r['version']))
            timings[key] = (float(r['gpu_us']), statistics.mean(mhz) if mhz else float('nan'))
    return timings


def layer(timings, model, rows, cv, version):
    got = [timings.get((model, p, rows, cv, version)) for p in PASSES]
    if None in got:
        return None
    return sum(g[0] for g in got), statistics.mean(g[1] for g in got if g[1] == g[1])


def main():
    T = load()
    print('| model | rows an expert | v4 even, us (MHz) | v4 cv 0.5 | v4 cv 0.5 / even | v6 even | v6 cv 0.5 | v6 cv 0.5 / even |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for model in ['mixtral', 'olmoe', 'test']:
        for rows in sorted({k[2] for k in T if k[0] == model}):
            cells = []
            for v in (4, 6):
                even, uneven = layer(T, model, rows, 0.0, v), layer(T, model, rows, 0.5, v)
                if even is None or uneven is None:
                    break
                cells += ['%.0f (%.0f)' % even, '%.0f (%.0f)' % uneven, '%+.1f%%' % (100 * (uneven[0] / even[0] - 1))]
            if len(cells) == 6:
                print('| %s | %d | %s |' % (model, rows, ' | '.join(cells)))
    print()
    print('Forward and data gradients, cv 0.5 over even and rows off the tile (each expert the same rows) over 1024 rows,'
          ' per unit of work, four streams (v6):')
    print()
    print('| model | pass | cv 0.5 at 1024 | 1088 even, per work | 960 even, per work |')
    print('|---|---|---:|---:|---:|')
    for model in ['mixtral', 'olmoe', 'test']:
        for p in PASSES[:4]:
            base = T.get((model, p, 1024, 0.0, 6))
            if base is None:
                continue
            cells = []
            u = T.get((model, p, 1024, 0.5, 6))
            cells.append('%+.1f%%' % (100 * (u[0] / base[0] - 1)) if u else '-')
            for rows in (1088, 960):
                o = T.get((model, p, rows, 0.0, 6))
                cells.append('%+.1f%%' % (100 * (o[0] / base[0] * 1024 / rows - 1)) if o else '-')
            print('| %s | %s | %s |' % (model, p, ' | '.join(cells)))


if __name__ == '__main__':
    main()
