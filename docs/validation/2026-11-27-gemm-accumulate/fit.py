#!/usr/bin/env python3
# docs/validation/2026-11-27-gemm-accumulate/fit.py: hwdb/priors.csv's gemm_accumulate_read_factor and
# gemm_accumulate_write_factor from this report's timings (h100/, h200/: dev/cuda/gemm_accumulate, two passes each).
# The time a weight gradient adds by adding into its gradient (beta 1) over writing its output (beta 0, cuBLASLt in
# the step's layout) is modelled as m n (c f_read + (c - 2) f_write) / (HBM bandwidth x membound_efficiency), c the
# gradient's bytes (2: bf16, 4: fp32); least squares on the relative error of the beta-1 times, over the shapes whose
# 16-bit gradient exceeds the GPUs' 50 MB L2 (a step's gradient is cold when the next micro-batch adds into it; the
# benchmark's small ones stay in L2 from call to call); each shape and each GPU left out in turn.  Prints the fit,
# the errors with and without it, and every timing.  python3 fit.py
import csv, os
import numpy as np
HERE = os.path.dirname(os.path.abspath(__file__))
BW = {'h200': 4.8e12 * 0.90, 'h100': 3.35e12 * 0.89}   # hwdb/gpus.csv: hbm_gbs x membound_efficiency
L2_BYTES = 50e6
rows = []
for gpu in BW:
    for p in ('pass1', 'pass2'):
        lines = [l for l in open(os.path.join(HERE, gpu, p + '.log')) if not l.startswith(' ')]
        for r in csv.DictReader(lines):
            m, n, k = int(r['m']), int(r['n']), int(r['k'])
            t = m * n / BW[gpu] * 1e6   # microseconds a byte per element
            b0 = float(r['lt_beta0_us'])
            for dt, col, c in (('bf16', 'lt_beta1_bf16_us', 2), ('fp32', 'lt_beta1_fp32_us', 4)):
                rows.append(dict(gpu=gpu, shape=r['shape'], k=k, cold=m * n * 2 > L2_BYTES, dt=dt, b0=b0,
                                 b1=float(r[col]), xr=c * t, xw=(c - 2) * t))
def fit(rs):
    a = np.array([[r['xr'] / r['b1'], r['xw'] / r['b1']] for r in rs])
    y = np.array([(r['b1'] - r['b0']) / r['b1'] for r in rs])
    return np.linalg.lstsq(a, y, rcond=None)[0]
def price(r, c): return r['b0'] + c[0] * r['xr'] + c[1] * r['xw']
def stats(e): return '%.1f%% mean |error|, %+.1f%% signed, worst %+.1f%%' % (100 * np.mean(np.abs(e)), 100 * np.mean(e), 100 * max(e, key=abs))
cold = [r for r in rows if r['cold']]
c = fit(cold)
print('fit on %d timings of %d shapes: read factor %.3f, write factor %.3f' % (len(cold), len({r['shape'] for r in cold}), c[0], c[1]))
for dt in ('bf16', 'fp32'):
    rs = [r for r in cold if r['dt'] == dt]
    print('  %s beta 1 against beta 0 alone: %s; with the read: %s' % (dt, stats([r['b0'] / r['b1'] - 1 for r in rs]),
                                                                      stats([price(r, c) / r['b1'] - 1 for r in rs])))
for key, what in (('shape', 'shape'), ('gpu', 'GPU')):
    errs = {'bf16': [], 'fp32': []}
    fits = []
    for v in sorted({r[key] for r in cold}):
        cc = fit([r for r in cold if r[key] != v])
        fits.append(cc)
        errs_v = [(r['dt'], price(r, cc) / r['b1'] - 1) for r in cold if r[key] == v]
        for dt, e in errs_v: errs[dt].append(e)
    f = np.array(fits)
    print('  each %s left out: read %.3f-%.3f, write %.3f-%.3f; bf16 %s; fp32 %s' % (
        what, f[:, 0].min(), f[:, 0].max(), f[:, 1].min(), f[:, 1].max(), stats(errs['bf16']), stats(errs['fp32'])))
print('\ngpu   shape                    k  dtype  beta0_us  beta1_us  priced_us  error  (L2: the gradient fits in L2)')
for r in rows:
    print('%-5s %-20s %6d  %-5s %9.1f %9.1f %10.1f %+6.1f%% %s' % (r['gpu'], r['shape'], r['k'], r['dt'], r['b0'], r['b1'],
          price(r, c), 100 * (price(r, c) / r['b1'] - 1), '' if r['cold'] else 'L2'))
