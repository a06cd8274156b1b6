#!/bin/bash
# docs/validation/2026-11-27-gemm-accumulate/build.sh BASE_H100 BASE_H200 DIR: the two shipped overlays rebuilt with
# the accumulating weight gradients' read taken out of the tile model's fit (hwdb/priors.csv's
# gemm_accumulate_read_factor and gemm_accumulate_write_factor), from the repository root, on the CPU:
#   - sextant fit-gemm on each overlay's own gemm_us rows (the tile model and the bias-gradient factor refitted);
#   - scripts/fit_power_sets.sh h100-sxm (the clock time K, b and the two power terms refitted on the H100's 38 steps);
#   - the H200 takes the H100's K and b (its own steps cannot regress them) and fit_power_sets.sh h200 refits its two
#     power terms on its 32 steps.
# BASE_*: the overlays before (git show f934f64:hwdb/measured/h100-sxm.csv and h200.csv).  DIR gets h100-sxm.csv and h200.csv
# (to compare with hwdb/measured/) and each step's output (fit-gemm-*.txt, fit-power-*.txt).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 BASE_H100 BASE_H200 DIR" >&2; exit 2; }
S=${SEXTANT:-build/sextant}
D=$3
mkdir -p "$D"
"$S" fit-gemm --gpu h100-sxm --calibration "$1" --out "$D/h100-tiles.csv" > "$D/fit-gemm-h100.txt"
"$S" fit-gemm --gpu h200 --calibration "$2" --out "$D/h200-tiles.csv" > "$D/fit-gemm-h200.txt"
SEXTANT=$S sh scripts/fit_power_sets.sh h100-sxm "$D/h100-tiles.csv" "$D/h100-sxm.csv" > "$D/fit-power-h100.txt"
K=$(sed -n 's/^h100-sxm,clock_time_factor,\([0-9.]*\),.*/\1/p' "$D/h100-sxm.csv")
B=$(sed -n 's/^h100-sxm,clock_time_exponent,\([0-9.]*\),.*/\1/p' "$D/h100-sxm.csv")
sed -e "s/^h200,clock_time_factor,[0-9.]*,/h200,clock_time_factor,$K,/" \
    -e "s/^h200,clock_time_exponent,[0-9.]*,/h200,clock_time_exponent,$B,/" "$D/h200-tiles.csv" > "$D/h200-tiles-kb.csv"
SEXTANT=$S sh scripts/fit_power_sets.sh h200 "$D/h200-tiles-kb.csv" "$D/h200.csv" > "$D/fit-power-h200.txt"
grep -h -E '^(fit on|all )' "$D/fit-gemm-h100.txt" "$D/fit-gemm-h200.txt"
grep -h -E '^(clock time|clock exponent|held out|SM clock)' "$D/fit-power-h100.txt" "$D/fit-power-h200.txt"
