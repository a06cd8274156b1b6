#!/bin/bash
# fit/build.sh [DIR]: the three H100 overlays this report weighed, rebuilt from fixed/calibrate.csv and the overlay of
# 2154b94 (the table timed on NaN operands), from the repository root, into DIR (default /tmp/calibrate-operands):
#   table:            the GEMM rows of gpt2, gpt2-medium and llama3.2-1b (the shipped table's three models; gpt3-5b's
#                     rows left out, as before) and calibrate's curve from the fixed run, the tile model refitted
#                     (sextant fit-gemm), then fit-power on the 38 steps (scripts/fit_power_sets.sh h100-sxm);
#   table-and-power:  the same with the fixed run's P_static, e_GEMM and e_byte;
#   shipped:          the same with the fixed run's e_GEMM only (the one power term the NaN operands biased: the
#                     GEMM samples ran after AdamW's; P_static is the spinning thread's, e_byte the copies' and
#                     LayerNorm's, all run before it), hwdb/measured/h100-sxm.csv since.
# Then each priced on the held-out sets (fit/heldout.sh).  Prints fit-power's summary lines.
set -eu
D=${1:-/tmp/calibrate-operands}
R=docs/validation/2026-11-27-h100-calibrate-operands
mkdir -p "$D"
git show 2154b94:hwdb/measured/h100-sxm.csv > "$D/before.csv"
python3 - "$R/fixed/calibrate.csv" "$D/before.csv" "$D" <<'PY'
import csv, io, sys
fixed, before, out = sys.argv[1:]
new = {r[1]: r for r in csv.reader(l for l in open(fixed) if not l.startswith('#')) if len(r) >= 4 and r[0] == 'h100-sxm'}
def model_of(r):  # the model a gemm_us row was timed for: "(gpt2 qkv, as the training step runs it)"
    return r[3][r[3].rfind('(') + 1:].split()[0]
rows = [r for k, r in new.items() if k.startswith('gemm_us:') and model_of(r) in ('gpt2', 'gpt2-medium', 'llama3.2-1b')]
def line(r):
    s = io.StringIO(); csv.writer(s, lineterminator='\n').writerow(r); return s.getvalue()
for name, power in (('table', ()), ('table-and-power', ('power_static_w', 'energy_gemm_pj_per_flop', 'energy_pj_per_byte')),
                    ('shipped', ('energy_gemm_pj_per_flop',))):
    text, done = [], False
    for l in open(before):
        r = next(csv.reader([l])) if l.strip() and not l.startswith('#') else []
        if len(r) >= 2 and r[1].startswith('gemm_us:'):
            if not done: text += [line(x) for x in rows]; done = True
            continue
        if len(r) >= 2 and r[1] in ('gemm_efficiency', 'gemm_half_gflop') + power:
            l = line(new[r[1]])
        text.append(l)
    open('%s/%s-0.csv' % (out, name), 'w').write(''.join(text))
PY
# the GEMM table the three overlays share, the one tests/test_fit_gemm.c refits (fit/h100-sxm-gemm-table.csv)
grep -E '^(gpu,key|h100-sxm,gemm_us:|h100-sxm,gemm_efficiency,|h100-sxm,gemm_half_gflop,)' "$D/table-0.csv" > "$D/h100-sxm-gemm-table.csv"
for v in table table-and-power shipped; do
    build/sextant fit-gemm --calibration "$D/$v-0.csv" --out "$D/$v-1.csv" > "$D/$v-fit-gemm.txt"
    sh scripts/fit_power_sets.sh h100-sxm "$D/$v-1.csv" "$D/$v.csv" > "$D/$v-fit-power.txt"
    echo "== $v"
    grep -E '^(clock time|clock exponent|held out|SM clock)' "$D/$v-fit-power.txt"
    bash "$R/fit/heldout.sh" "$D/$v.csv"
done
