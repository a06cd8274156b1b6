#!/bin/sh
# docs/validation/2026-11-28-moe-rank-waits/reprice.sh [SEXTANT]: this report's routed runs re-priced by fit-power's
# "before" column (each card's shipped overlay as given), from the repository root: the ten 2 x H200 and one-H200
# runs (run/, one-gpu/, olmoe-empty/), then the two one-H100 runs of Mixtral at 512 rows an expert with the router
# (large-ab/router-lt, router-ex).  The runs with SEXTANT_MOE_ROUTE=balanced (balanced-h100/, large-ab/lt, ex) are
# not re-priced here: fit-power prices a run as routed; their own CSVs hold the even price of their day.
set -eu
S=${1:-build/sextant}
D=docs/validation/2026-11-28-moe-rank-waits
R=""
for x in run/dp2z1 run/tp2sp run/pp2 run/cp2 run/cp2_olmoe one-gpu/1gpu_s2k one-gpu/1gpu one-gpu/1gpu_s2k_again \
         olmoe-empty/cp2_olmoe olmoe-empty/dp2z3_olmoe; do R="$R,$D/$x.csv"; done
MOE_RUNS=${R#,} sh docs/validation/2026-11-27-moe-weighted-swiglu/moe20.sh "$S"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$S" fit-power --gpu h100-sxm --calibration hwdb/measured/h100-sxm.csv \
    --models docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv --out "$T/o.csv" \
    --runs "$D/large-ab/router-lt/1gpu_s2k.csv,$D/large-ab/router-ex/1gpu_s2k.csv" > "$T/fit.txt"
grep -E '^[^ ]+\.csv ' "$T/fit.txt" | paste -d' ' - /dev/null | awk '{printf "one H100, 512 rows: %10s %10s %7s\n", $2, $3, $4}'
