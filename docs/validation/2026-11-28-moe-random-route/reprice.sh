#!/bin/sh
# docs/validation/2026-11-28-moe-random-route/reprice.sh [SEXTANT]: the MoE held-out runs with SEXTANT_MOE_ROUTE=random
# (each token's experts drawn at random, a router balanced as a trained one is in expectation;
# tests/data/2026-11-28-moe-random-route) beside the same layouts with the model's own untrained router
# (tests/data/2026-11-28-expert-algos, the same validator), each priced by fit-power's "before" column (the shipped
# H200 overlay as given): per run measured, priced, error, then the summary lines.
set -eu
S=${1:-build/sextant}
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
for route in router random; do
    D=tests/data/2026-11-28-moe-random-route
    [ $route = router ] && D=tests/data/2026-11-28-expert-algos
    RUNS=""
    for x in olmoe-4l/1gpu olmoe-4l/dp2z2 olmoe-4l/dp2z3 olmoe-4l/dp2z3rc olmoe-4l/cp2 olmoe-4l/ep2 mixtral-2l/1gpu mixtral-2l/cp2; do
        RUNS="$RUNS${RUNS:+,}$D/$x.csv"
    done
    "$S" fit-power --gpu h200 --calibration hwdb/measured/h200.csv --models "$Z" --out "$T/o.csv" --runs "$RUNS" > "$T/fit.txt"
    echo "route: $route"
    echo "$RUNS" | tr , '\n' | sed 's|.*/\([a-z0-9-]*\)/\([a-z0-9_]*\)\.csv|\1/\2|' > "$T/names"
    grep -E '^[^ ]+\.csv ' "$T/fit.txt" | paste -d' ' "$T/names" - | awk '{printf "  %-18s %10s %10s %7s\n", $1, $3, $4, $5}'
    grep -E '^before' "$T/fit.txt" | sed 's/^/  /'
done
