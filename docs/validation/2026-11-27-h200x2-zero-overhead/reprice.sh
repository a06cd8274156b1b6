#!/bin/sh
# docs/validation/2026-11-27-h200x2-zero-overhead/reprice.sh [SEXTANT]: the 35 two-GPU H200 runs of runs.txt re-priced
# with the shipped overlay (fit-power's "before" columns), one line each: run, measured, predicted, error, NVML's
# clock, the model's clock.  From the repository root; SEXTANT names another binary (default build/sextant), e.g.
# one built with variants.patch, whose switches XTAIL, XADD, XPOW, XCLK are read from the environment.
set -eu
R=docs/validation/2026-11-27-h200x2-zero-overhead
OUT=$(mktemp)
trap 'rm -f "$OUT" "$OUT.fit"' EXIT
"${1:-build/sextant}" fit-power --gpu h200 --calibration hwdb/measured/h200.csv --models $R/zoo_union.csv \
    --out "$OUT.fit" --runs "$(paste -sd, - < $R/runs.txt)" > "$OUT"
# fit-power names each run by its file; the runs' folders tell the models apart
awk -F/ '{ d = $(NF-2); sub(/^2026-11-2[0-9]-/, "", d); print d "/" $(NF-1) "/" $NF }' $R/runs.txt | paste -d' ' - \
    "$(awk '/^[a-z0-9_]*\.csv /{print $2, $3, $4, $9, $10}' "$OUT" > "$OUT.cols" && echo "$OUT.cols")" |
    awk '{printf "%-46s %10s %10s %7s %6s %6s\n", $1, $2, $3, $4, $5, $6}'
grep '^before' "$OUT"
rm -f "$OUT.cols"
