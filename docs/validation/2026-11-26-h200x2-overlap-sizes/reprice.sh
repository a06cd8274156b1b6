#!/bin/bash
# The recorded two- and four-GPU steps priced with the overlays and priors before this report (commit
# 9c6bcb9) and with the current ones: each run's step error (fit-power's "before" column: the overlay
# as given, nothing refitted). Run from the repository root after `make build/sextant`.
set -euo pipefail
S=${SEXTANT:-build/sextant}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/hwdb"
for f in gpus.csv nodes.csv priors.csv uncertainty.csv; do git show 9c6bcb9:hwdb/$f > "$tmp/hwdb/$f"; done
git show 9c6bcb9:hwdb/measured/h200.csv > "$tmp/h200.csv"
git show 9c6bcb9:hwdb/measured/h100-sxm.csv > "$tmp/h100-sxm.csv"
price() {   # label, gpu, overlay, hwdb, files...
    local label=$1 gpu=$2 overlay=$3 db=$4; shift 4
    echo "== $label"
    "$S" fit-power --gpu "$gpu" --hwdb "$db" --calibration "$overlay" --runs "$(echo "$@" | tr ' ' ',')" --out "$tmp/fit.csv" |
        awk '/^run/{p=1; next} /^clock/{p=0} p{print "  " $1, $2, $3, $4} /^before/{print "  " $0}'
}
Z=docs/validation/2026-11-26-h200x2-zero-side
for set in "h200 two-gpu:tests/data/2026-11-26-h200-calibrated/two-gpu/*.csv" \
           "h200 four-gpu:tests/data/2026-11-26-h200-calibrated/four-gpu/*.csv" \
           "h200 zero-side:$Z/raw/*before.csv" \
           "h100-sxm unseen:tests/data/2026-11-26-h100x2-unseen/*.csv" \
           "h100-sxm zero:$Z/h100-clear/t_*.csv"; do
    name=${set%%:*}; glob=${set#*:}; gpu=${name%% *}
    # shellcheck disable=SC2086
    files=$(ls $glob | grep -v _1gpu)
    price "$name, before" "$gpu" "$tmp/$gpu.csv" "$tmp/hwdb" $files
    price "$name, now" "$gpu" "hwdb/measured/$gpu.csv" hwdb $files
done
