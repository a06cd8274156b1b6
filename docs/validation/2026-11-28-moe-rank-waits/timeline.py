#!/usr/bin/env python3
"""The tables of README.md from run/ (timeline.sh's call): each layout's step, clock and the ranks' waits, and the
experts' GEMMs call by call from the profiling step's timeline (SEXTANT_TIMELINE).  Run from the repository root."""
import csv, os, re, statistics

D = 'docs/validation/2026-11-28-moe-rank-waits'
RUN = D + '/run'
LAYOUTS = ['dp2z1', 'tp2sp', 'pp2', 'cp2', 'cp2_olmoe']
EXPERT_OPS = ['expert_up', 'expert_down', 'expert_up_dgrad', 'expert_down_dgrad', 'expert_up_wgrad', 'expert_down_wgrad']


def log_numbers(name, run=RUN):
    text = open(os.path.join(run, name + '.log')).read()
    step = re.search(r'step time: median ([\d.]+) ms .* predicted ([\d.]+) ms \(([-+\d.]+)%\)', text)
    power = re.search(r'power: (\d+) W and (\d+) MHz', text)
    model = re.search(r'power model: predicted (\d+) W at (\d+) MHz', text)
    return [float(x) for x in step.groups()], [int(x) for x in power.groups()], [int(x) for x in model.groups()]


def calls(name, rank, run=RUN):
    """[(op, ms)] of the profiling step, in issue order"""
    rows = csv.DictReader(open(os.path.join(run, 'tl_%s.rank%d.csv' % (name, rank))))
    return [(r['op'], float(r['end_ms']) - float(r['start_ms']), r['side']) for r in rows]


def priced_ms(name, run=RUN):
    """the op's predicted seconds a step on rank 0, from the run's per-op CSV (calibrated rows), in ms"""
    out = {}
    for r in csv.DictReader(open(os.path.join(run, name + '.csv'))):
        if r['calibrated'] == '1' and r['rank'] == '0' and r['predicted_s']:
            out[r['op']] = float(r['predicted_s']) * 1e3
    return out


def main():
    print('| layout | measured ms | predicted ms | error | NVML W, MHz | power model MHz | first collective, rank 0 / 1 ms '
          '| the collective the ranks differ most in, ms a step, rank 0 / 1 |')
    print('|---|---:|---:|---:|---|---:|---|---|')
    collective = ('tp_', 'cp_ring', 'dp_', 'edp_', 'pp_', 'ep_alltoall')
    for name in LAYOUTS:
        (meas, pred, err), (w, mhz), (_, model_mhz) = log_numbers(name)
        first, sums = [], [{}, {}]
        for rank in (0, 1):
            ops = [(op, ms) for op, ms, _ in calls(name, rank) if op.startswith(collective) and not op.endswith('_wait')]
            first.append(ops[0] if ops else ('-', 0.0))
            for op, ms in ops:
                sums[rank][op] = sums[rank].get(op, 0.0) + ms
        most = max(sums[0], key=lambda op: abs(sums[0][op] - sums[1].get(op, 0.0)))
        print('| %s | %.2f | %.2f | %+.1f%% | %d, %d | %d | %s %.2f / %.2f | %s %.2f / %.2f |' % (
            name, meas, pred, err, w, mhz, model_mhz, first[0][0], first[0][1], first[1][1], most, sums[0][most],
            sums[1].get(most, 0.0)))
    print()
    print('Expert GEMM ops of the profiling step, ms a call: priced (rank 0) against the median of the calls and the')
    print('slowest; "stalls": calls over 1.5 x the median, and what the op reads without them:')
    print()
    print('| layout | op | calls | priced a call | median, rank 0 / 1 | slowest | stalls | priced vs the op without stalls |')
    print('|---|---|---:|---:|---|---:|---:|---:|')
    for name in LAYOUTS:
        priced = priced_ms(name)
        for op in EXPERT_OPS:
            per_rank = [[ms for o, ms, _ in calls(name, rank) if o == op] for rank in (0, 1)]
            n = len(per_rank[0])
            if not n or op not in priced:
                continue
            med = [statistics.median(d) for d in per_rank]
            stalls = sum(1 for d, m in zip(per_rank, med) for x in d if x > 1.5 * m)
            kept = [x for x in per_rank[0] if x <= 1.5 * med[0]]
            clean = sum(kept) / len(kept) * n
            print('| %s | %s | %d | %.3f | %.3f / %.3f | %.3f | %d | %+.1f%% |' % (
                name, op, n, priced[op] / n, med[0], med[1], max(max(d) for d in per_rank), stalls,
                100 * (priced[op] / clean - 1)))
    print()
    for name in ('cp2', 'cp2_olmoe'):
        priced = priced_ms(name)
        for op in ('cp_ring_kv', 'cp_ring_kv_dkv_bwd'):
            d = [[ms for o, ms, _ in calls(name, rank) if o == op] for rank in (0, 1)]
            print('%s %s: priced %.3f ms a call; measured, rank 0: median %.3f (first %.3f); rank 1: median %.3f '
                  '(first %.3f); sums %.2f / %.2f ms a step' % (
                      name, op, priced[op] / len(d[0]), statistics.median(d[0]), d[0][0], statistics.median(d[1]),
                      d[1][0], sum(d[0]), sum(d[1])))


def one_rank_table():
    """Mixtral alone at 512 and 1024 rows an expert: the router (one H200; one H100) against every expert the same rows
    (one H100), the large GEMMs on 16-row buckets (lt) or cublasGemmEx (ex): the expert ops' median call against the
    price of the run's day (even rows: the binary before the routed rows' tiles)"""
    runs = [('H200 router lt, 1024 rows', 'one-gpu', '1gpu'), ('H200 router lt, 512 rows', 'one-gpu', '1gpu_s2k'),
            ('H100 balanced lt, 1024 rows', 'balanced-h100', '1gpu'), ('H100 balanced lt, 512 rows', 'large-ab/lt', '1gpu_s2k'),
            ('H100 balanced ex, 512 rows', 'large-ab/ex', '1gpu_s2k'), ('H100 router lt, 512 rows', 'large-ab/router-lt', '1gpu_s2k'),
            ('H100 router ex, 512 rows', 'large-ab/router-ex', '1gpu_s2k')]
    print('| run | step: measured, priced | ' + ' | '.join(o.replace('expert_', '') for o in EXPERT_OPS) + ' | sum a call |')
    print('|---|---|' + '---:|' * (len(EXPERT_OPS) + 1))
    for label, folder, name in runs:
        run = os.path.join(D, folder)
        (meas, pred, err), _, _ = log_numbers(name, run)
        priced = priced_ms(name, run)
        cells, total = [], 0.0
        for op in EXPERT_OPS:
            d = [ms for o, ms, _ in calls(name, 0, run) if o == op]
            med = statistics.median(d)
            total += med
            cells.append('%.3f (%+.0f%%)' % (med, 100 * (priced[op] / len(d) / med - 1)))
        print('| %s | %.1f, %.1f ms (%+.1f%%) | %s | %.3f |' % (label, meas, pred, err, ' | '.join(cells), total))


if __name__ == '__main__':
    main()
    print()
    one_rank_table()
