#!/bin/bash
# docs/validation/2026-11-27-h200-calibrate-operands/heldout.sh H200_OVERLAY: the H200 sets no fit has seen, priced
# with that overlay (fit-power's "before" column, the overlay as given), from the repository root:
#   - each of the ten one-GPU models predicted by the power fit on the other nine (scripts/fit_power_sets.sh h200);
#   - the 28 dense two- and four-GPU runs and the held-out Qwen shape (docs/validation/2026-11-27-gemm-clock-time);
#   - the 21 dense two-H200 runs of OLMo-1B and Yi-6B shapes (docs/validation/2026-11-27-h200x2-heldout-new);
#   - the 23 MoE runs (Mixtral 8x7B cut to 2 layers, OLMoE to 4; docs/validation/2026-11-27-h200x2-heldout-moe);
#   - this report's five one-GPU steps at widths 8192 and 12288 (wide/).
# The "before" of the README is this script on `git show f82a00a:hwdb/measured/h200.csv`.
set -u
O=$1
S=${SEXTANT:-build/sextant}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
before() { "$S" fit-power "$@" --out "$T/o.csv" > "$T/fit.txt"; sed -n 's/^before (the overlay as given): //p' "$T/fit.txt"; }
sh scripts/fit_power_sets.sh h200 "$O" "$T/o.csv" > "$T/sets.txt"
echo "one GPU, each of 10 models left out (32): $(sed -n 's/^held out (each of the 10 models predicted by the fit on the others): //p' "$T/sets.txt")"
bash docs/validation/2026-11-27-gemm-clock-time/heldout.sh "$O" hwdb/measured/h100-sxm.csv "$S" | grep 'H200\|Qwen\|of them'
N=docs/validation/2026-11-27-h200x2-heldout-new
echo "2 x H200 OLMo and Yi shapes, dense (21): $(before --gpu h200 --calibration "$O" --models docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv \
    --runs "$(ls $N/olmo/*.csv $N/yi/*.csv | grep -v moe | paste -sd, -)")"
M=tests/data/2026-11-27-h200x2-heldout-moe
echo "2 x H200 MoE (23): $(before --gpu h200 --calibration "$O" --models docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv \
    --runs "$(ls $M/run1/*/*.csv $M/run2/*/*.csv | paste -sd, -)")"
grep -E '^[^ ]+\.csv ' "$T/fit.txt" | awk '{print "  " $1, $2, $3, $4}' | paste - - - -   # Mixtral, OLMoE; run1, run2 (ls's order)
echo "widths 8192 and 12288, one H200 (5): $(before --gpu h200 --calibration "$O" \
    --models docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv \
    --runs "$(ls docs/validation/2026-11-27-h200-calibrate-operands/wide/*.csv | paste -sd, -)")"
grep -E '^[^ ]+\.csv ' "$T/fit.txt" | awk '{print "  " $1, $2, $3, $4, "model", $8, "MHz, NVML", $7}'
sed -n 's/^SM clock, /  SM clock, /p' "$T/fit.txt"
