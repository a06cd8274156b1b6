#!/bin/sh
# docs/validation/2026-11-27-h200x2-heldout-moe/reprice.sh [SEXTANT]: the report's 23 runs re-priced with the shipped
# H200 overlay by fit-power (its "before" columns: the step, and the peak memory per GPU), from the repository root.
# SEXTANT names another binary (default build/sextant), e.g. one built at 098bfe2 for the table's "before".
set -eu
T=tests/data/2026-11-27-h200x2-heldout-moe
exec "${SEXTANT:-build/sextant}" fit-power --gpu h200 --calibration hwdb/measured/h200.csv \
    --models docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv --out "${TMPDIR:-/tmp}/reprice-moe.csv" \
    --runs "$(ls $T/run1/*/*.csv $T/run2/*/*.csv | paste -sd, -)"
