"""The recorded steps of a validation folder re-predicted with an overlay: each run's step error and the
error of its GEMM ops (predicted for all instances of the op against the time validate measured for it).
Run from the repository root, after `make build/sextant`:
    python3 docs/validation/2026-11-26-h100-gemm-model/heldout_ops.py RUNS_DIR OVERLAY [OVERLAY ...]
(V=1 lists every GEMM op.)  An analysis aid for this report, not part of sextant."""
import csv, glob, json, os, subprocess, sys

GEMMS = {p + s for p in ('qkv', 'attn_out', 'mlp_up', 'mlp_down', 'lm_head') for s in ('', '_dgrad', '_wgrad')}


def summary(errors):
    return '%.1f%% signed %+.1f%% worst %+.1f%%' % (100 * sum(map(abs, errors)) / len(errors),
                                                    100 * sum(errors) / len(errors), 100 * max(errors, key=abs))


def report(runs, overlay, verbose):
    steps, ops, by_kind = [], [], {}
    files = sorted(f for f in glob.glob(runs + '/*.csv') if 'calibrated' in open(f).readline())
    for path in files:
        rows = [r for r in csv.DictReader(open(path)) if r['calibrated'] == '1']
        r0 = rows[0]
        args = ['build/sextant', 'estimate', r0['model'], '--gpu', r0['gpu'], '--mbs', r0['mbs'], '--gbs', r0['gbs'],
                '--seq', r0['seq'], '--attention', r0['attention'], '--recompute', 'none', '--no-dropout',
                '--calibration', overlay, '--format', 'json', '--ops']
        estimate = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout)
        predicted = {}
        for stage in estimate['stages']:
            for op in stage['ops']:
                key = (op['name'], op['pass'])
                predicted[key] = predicted.get(key, 0.0) + op['time_s'] * op['count']
        step = [r for r in rows if r['op'] == 'step'][0]
        steps.append(estimate['time']['step_s'] / float(step['measured_s']) - 1)
        mine = []
        for r in rows:
            key = (r['op'], r['pass'])
            if r['op'] in GEMMS and key in predicted:
                e = predicted[key] / float(r['measured_s']) - 1
                mine.append(e)
                kind = 'wgrad' if r['op'].endswith('wgrad') else 'dgrad' if r['op'].endswith('dgrad') else 'fwd'
                by_kind.setdefault(kind, []).append(e)
                if verbose:
                    print('   %-42s %-16s %+6.1f%%' % (os.path.basename(path)[:42], r['op'], 100 * e))
        ops += mine
        print('%-42s step %+5.1f%%   GEMM ops %s' % (os.path.basename(path), 100 * steps[-1], summary(mine)))
    print('steps (%d): %s\nGEMM ops (%d): %s' % (len(steps), summary(steps), len(ops), summary(ops)))
    for kind in sorted(by_kind):
        print('  %-5s (%d): %s' % (kind, len(by_kind[kind]), summary(by_kind[kind])))


for overlay in sys.argv[2:]:
    print('== ' + overlay)
    report(sys.argv[1], overlay, os.environ.get('V') == '1')
