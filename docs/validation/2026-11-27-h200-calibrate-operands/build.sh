#!/bin/bash
# docs/validation/2026-11-27-h200-calibrate-operands/build.sh [DIR]: the shipped H200 overlay rebuilt from this
# report's calibrate run (fixed/calibrate.csv) and the overlay before it (f82a00a's, its GEMM table timed on NaN
# operands), from the repository root, into DIR (default /tmp/h200-calibrate-operands); then its rows (the comments
# aside) compared with hwdb/measured/h200.csv.  DIR keeps fit-gemm's and fit-power's output (fit-gemm.txt,
# fit-power.txt).
set -eu
D=${1:-/tmp/h200-calibrate-operands}
R=docs/validation/2026-11-27-h200-calibrate-operands
mkdir -p "$D"
git show f82a00a:hwdb/measured/h200.csv > "$D/before.csv"
BASE="$D/before.csv" TIME_FROM=hwdb/measured/h100-sxm.csv KEEP="$D" \
    bash scripts/retime_overlay.sh h200 "$R/fixed/calibrate.csv" "$D/h200.csv"
if cmp -s <(grep -v '^#' "$D/h200.csv") <(grep -v '^#' hwdb/measured/h200.csv); then
    echo "rows identical to hwdb/measured/h200.csv"
else
    echo "rows differ from hwdb/measured/h200.csv" >&2; exit 1
fi
