#!/bin/sh
# scripts/fit_power_sets.sh GPU OVERLAY OUT: sextant fit-power over the one-GPU validate runs each shipped overlay's
# power terms are fitted on (docs/model.md, "Clock under the power cap"), from the repository root.
#   h200:      the 18 steps of tests/data/2026-11-26-h200-calibrated/one-gpu and the 14 of
#              tests/data/2026-11-26-h200-heldout (ten models);
#   h100-sxm:  the 38 steps of docs/validation/2026-11-25-h100-power/run-power-model, -2026-11-25-h100-heldout/run
#              and -2026-11-26-h100-attention-heldout/raw-steps (13 models).
# A run the attention kernel's dK, dV split (b663dd9) made faster is taken from its re-run after it
# (tests/data/2026-11-27-attention-retime, docs/validation/2026-11-27-attention-retime) in place of the old one.
# The zoo of the held-out models (cut in depth) is docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv;
# SEXTANT names another binary (default build/sextant).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 h200|h100-sxm OVERLAY OUT" >&2; exit 2; }
GPU=$1
RETIME=tests/data/2026-11-27-attention-retime/$GPU
# runs DIR PATTERN...: the CSVs, each replaced by its re-run where there is one
runs() {
    dir=$1
    shift
    for pattern in "$@"; do
        for f in "$dir"/$pattern; do
            [ -f "$f" ] || continue
            b=$(basename "$f")
            if [ -f "$RETIME/$b" ]; then echo "$RETIME/$b"; else echo "$f"; fi
        done
    done
}
case $GPU in
h200)
    LIST=$( (runs tests/data/2026-11-26-h200-calibrated/one-gpu '*.csv'; runs tests/data/2026-11-26-h200-heldout '*.csv') ) ;;
h100-sxm)
    LIST=$( (runs docs/validation/2026-11-25-h100-power/run-power-model 'train_*.csv' 'flash_*.csv'
             runs docs/validation/2026-11-25-h100-heldout/run '*_unfused.csv' '*_flash.csv'
             runs docs/validation/2026-11-26-h100-attention-heldout/raw-steps '*.csv') ) ;;
*) echo "$0: GPU must be h200 or h100-sxm, not '$GPU'" >&2; exit 2 ;;
esac
exec "${SEXTANT:-build/sextant}" fit-power --gpu "$GPU" --calibration "$2" --out "$3" \
    --models docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv --runs "$(echo "$LIST" | paste -sd, -)"
