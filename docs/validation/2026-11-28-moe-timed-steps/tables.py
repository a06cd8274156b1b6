#!/usr/bin/env python3
"""The tables of README.md from the runs as recorded: call 1 (runs/: Mixtral's layouts, each as the held-out script
runs it and with one thing changed) and call 2 (tests/data/2026-11-28-moe-random-all: the held-out set with the
random route), beside the same layouts with the router (tests/data/2026-11-28-expert-algos).
  python3 docs/validation/2026-11-28-moe-timed-steps/tables.py"""
import csv, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..', '..'))


def log_figures(path):
    t = open(path).read()
    step = re.search(r'step time: median ([\d.]+) ms over \d+ timed steps \(spread ([\d.]+)%.*predicted ([\d.]+) ms \(([-+\d.]+)%\)', t)
    prof = re.search(r'profiling step: [\d.]+ ms with \d+ event pairs \(([-+\d.]+)% on the timed median', t)
    host = re.search(r'host: rank 0 issued a step in ([\d.]+) ms', t)
    mem = re.search(r'heaviest stage \(([-+\d.]+)%\)', t)
    steps = [float(x) for x in re.findall(r'^step +\d+ +loss [\d.]+ +([\d.]+) ms', t, re.M)]
    return dict(median=float(step.group(1)), spread=float(step.group(2)), predicted=float(step.group(3)),
                error=float(step.group(4)), profiled=float(prof.group(1)), host=float(host.group(1)),
                memory=float(mem.group(1)) if mem else None, steps=steps)


def op_groups(path):
    """rank 0's measured ms a step by kind of op, from the profiling step"""
    g = {'expert GEMMs': 0.0, 'collectives': 0.0, 'the rest': 0.0}
    for r in csv.DictReader(open(path)):
        if r['rank'] != '0' or r['calibrated'] != '1' or r['op'] in ('step', 'bubble', 'dp_exposed'):
            continue
        op, ms = r['op'], float(r['measured_s'] or 0) * 1e3
        if op.startswith('expert_') and 'swiglu' not in op:
            g['expert GEMMs'] += ms
        elif op.startswith(('tp_', 'dp_', 'moe_tp', 'cp_', 'pp_', 'ep_', 'edp_')):
            g['collectives'] += ms
        else:
            g['the rest'] += ms
    return g


print('## Call 1: Mixtral 2 layers, 2 x H200, each layout four ways\n')
print('| layout | variant | timed median ms | error | spread | profiling step vs median | host issue ms | '
      'expert GEMMs / collectives / rest, ms (profiling step, rank 0) |')
print('|---|---|---:|---:|---:|---:|---:|---|')
runs = os.path.join(HERE, 'runs')
for lay in ('tp2sp', 'dp2z1', 'cp2', 'pp2'):
    for var in ('base', 'poll0', 'probe', 'random'):
        log = os.path.join(runs, f'{lay}_{var}.log')
        if not os.path.exists(log):
            continue
        f = log_figures(log)
        g = op_groups(os.path.join(runs, f'{lay}_{var}.csv'))
        print(f"| {lay} | {var} | {f['median']:.1f} | {f['error']:+.1f}% | {f['spread']:.1f}% | {f['profiled']:+.1f}% | "
              f"{f['host']:.1f} | {g['expert GEMMs']:.1f} / {g['collectives']:.1f} / {g['the rest']:.1f} |")
print('\nEvery step (ms), the first five the warm-up:\n')
for lay in ('tp2sp', 'dp2z1'):
    for var in ('base', 'poll0', 'random'):
        f = log_figures(os.path.join(runs, f'{lay}_{var}.log'))
        print(f"- {lay} {var}: " + ' '.join(f'{x:.0f}' for x in f['steps']))

print('\n## Call 2: the held-out set, the random route against the router\n')
print('| model | layout | router ms | error | random ms | predicted ms | error | memory error, router / random |')
print('|---|---|---:|---:|---:|---:|---:|---|')
router_dir = os.path.join(ROOT, 'tests/data/2026-11-28-expert-algos')
random_dirs = [os.path.join(ROOT, 'tests/data/2026-11-28-moe-random-all'),
               os.path.join(ROOT, 'tests/data/2026-11-28-moe-random-route')]
errors = {'router': [], 'random': []}
for m in ('mixtral-2l', 'olmoe-4l'):
    for lay in ('1gpu', 'dp2z1', 'dp2z2', 'dp2z3', 'dp2z3rc', 'ep2', 'ep2z3', 'tp2sp', 'pp2', 'cp2', 'cp2ep2'):
        a = log_figures(os.path.join(router_dir, m, lay + '.log'))
        path = next(os.path.join(d, m, lay + '.log') for d in random_dirs if os.path.exists(os.path.join(d, m, lay + '.log')))
        b = log_figures(path)
        errors['router'].append((a['error'], a['memory'], lay))
        errors['random'].append((b['error'], b['memory'], lay))
        print(f"| {m} | {lay} | {a['median']:.1f} | {a['error']:+.1f}% | {b['median']:.1f} | {b['predicted']:.1f} | "
              f"{b['error']:+.1f}% | {a['memory']:+.1f}% / {b['memory']:+.1f}% |")
print()
for route, e in errors.items():
    t = [x[0] for x in e]
    m = [x[1] for x in e]
    two = [x[0] for x in e if x[2] != '1gpu']
    print(f"- {route}: time {sum(map(abs, t)) / len(t):.1f}% mean ({sum(t) / len(t):+.1f}% signed), worst "
          f"{max(t, key=abs):+.1f}%, {sum(abs(x) <= 5 for x in two)} of {len(two)} two-GPU layouts within 5%; memory "
          f"{sum(map(abs, m)) / len(m):.1f}% mean, worst {max(m, key=abs):+.1f}%")
