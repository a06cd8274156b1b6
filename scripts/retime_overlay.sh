#!/bin/bash
# scripts/retime_overlay.sh GPU CALIBRATE_CSV OUT: an overlay whose GEMM table was timed on NaN operands (before
# scratch_refresh, docs/validation/2026-11-27-h100-calibrate-operands) re-timed from a calibrate run with the fix, as
# the H100's was, from the repository root and on the CPU:
#   - the overlay's (BASE's) gemm_us rows replaced by CALIBRATE_CSV's of the same three models (gpt2, gpt2-medium,
#     llama3.2-1b), its gemm_efficiency, gemm_half_gflop and POWER_KEYS taken (by default energy_gemm_pj_per_flop,
#     the one power term the NaN operands biased; P_static and e_byte stay);
#   - the tile model refitted (sextant fit-gemm), then scripts/fit_power_sets.sh GPU (the clock time and the two power
#     terms); where its steps cannot regress the clock time (the H200's all ran capped), TIME_FROM=OVERLAY gives the
#     clock_time_factor and clock_time_exponent to keep (the H100's, hwdb/measured/h100-sxm.csv).
# BASE: the overlay re-made (default hwdb/measured/GPU.csv).
# POWER_KEYS (default energy_gemm_pj_per_flop): the power terms taken from CALIBRATE_CSV, comma-separated ("" for none);
# KEEP=DIR keeps the steps' files there (table.csv, tiles.csv, fit-gemm.txt, fit-power.txt).
# Prints fit-gemm's and fit-power's summaries; OUT is the overlay to review and copy over hwdb/measured/GPU.csv.
set -eu
[ $# -eq 3 ] || { echo "usage: $0 GPU CALIBRATE_CSV OUT" >&2; exit 2; }
GPU=$1 FIXED=$2 OUT=$3
if [ -n "${KEEP:-}" ]; then T=$KEEP; mkdir -p "$T"; else T=$(mktemp -d); trap 'rm -rf "$T"' EXIT; fi
python3 - "$GPU" "$FIXED" "${BASE:-hwdb/measured/$GPU.csv}" "${TIME_FROM:-}" "$T/table.csv" "${POWER_KEYS-energy_gemm_pj_per_flop}" <<'PY'
import csv, io, sys
gpu, fixed, shipped, time_from, out, power_keys = sys.argv[1:]
power = tuple(k for k in power_keys.split(',') if k)
def rows(path, of=gpu):
    return {r[1]: r for r in csv.reader(l for l in open(path) if not l.startswith('#')) if len(r) >= 4 and r[0] == of}
new = rows(fixed)
def model_of(r):  # "(gpt2 qkv, as the training step runs it)"
    return r[3][r[3].rfind('(') + 1:].split()[0]
table = [r for k, r in new.items() if k.startswith('gemm_us:') and model_of(r) in ('gpt2', 'gpt2-medium', 'llama3.2-1b')]
if len(table) < 100:
    sys.exit('%s: %d gemm_us rows of the three models; expected about 198' % (fixed, len(table)))
keep = {}
if time_from:  # another GPU's overlay: its own rows, whichever GPU they name
    first = next(r for r in csv.reader(l for l in open(time_from) if not l.startswith('#')) if len(r) >= 4 and r[0] != 'gpu')
    keep = {k: r for k, r in rows(time_from, first[0]).items() if k in ('clock_time_factor', 'clock_time_exponent')}
    if len(keep) != 2:
        sys.exit('%s: no clock_time_factor and clock_time_exponent' % time_from)
    for r in keep.values():  # the source says whose value it is and why it is borrowed
        r[0], r[3] = gpu, ("%s's value from %s, %s; this GPU's own steps cannot regress it (none within 3%% of the "
                           "top clock, or clocks spread under 10%%)" % (first[0], time_from, r[3].split(' on ')[0]))
def line(r):
    s = io.StringIO(); csv.writer(s, lineterminator='\n').writerow(r); return s.getvalue()
text, done = [], False
for l in open(shipped):
    r = next(csv.reader([l])) if l.strip() and not l.startswith('#') else []
    if len(r) >= 2 and r[1].startswith('gemm_us:'):
        if not done: text += [line(x) for x in table]; done = True
        continue
    if len(r) >= 2 and r[1] in ('gemm_efficiency', 'gemm_half_gflop') + power:
        l = line(new[r[1]])
    elif len(r) >= 2 and r[1] in keep:
        l = line(keep[r[1]])
    text.append(l)
open(out, 'w').write(''.join(text))
print('%d gemm_us rows of the three models from %s' % (len(table), fixed))
PY
"${SEXTANT:-build/sextant}" fit-gemm --gpu "$GPU" --calibration "$T/table.csv" --out "$T/tiles.csv" > "$T/fit-gemm.txt"
grep -E '^(fit on|all )' "$T/fit-gemm.txt"
sh scripts/fit_power_sets.sh "$GPU" "$T/tiles.csv" "$OUT" > "$T/fit-power.txt"
grep -E '^(clock time|clock exponent|held out|SM clock)' "$T/fit-power.txt"
