#!/bin/sh
# The H200's recorded steps priced by the overlay without and with optimizer_membound_efficiency (fit-power's
# "before" line: the overlay as given).  From the repository root after `make`:
#   sh docs/validation/2026-11-28-optimizer-bandwidth/reprice.sh
set -eu
without=$(mktemp) out=$(mktemp)
grep -v ',optimizer_membound_efficiency,' hwdb/measured/h200.csv > "$without"
moe=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
dense=docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv
line() {   # line NAME ZOO DIR...: one line per overlay for the runs (their CSVs) under DIR...
    name=$1 zoo=$2
    shift 2
    runs=$(find "$@" -name '*.csv' ! -name 'summary*' | sort | tr '\n' ',' | sed 's/,$//')
    for o in "$without" hwdb/measured/h200.csv; do
        printf '%-34s %-8s ' "$name" "$([ "$o" = "$without" ] && echo without || echo with)"
        build/sextant fit-power --gpu h200 --calibration "$o" ${zoo:+--models $zoo} --out "$out" --runs "$runs" |
            grep '^before' | sed 's/^before (the overlay as given): //'
    done
}
line "one GPU, the overlay's fit" "" tests/data/2026-11-26-h200-calibrated/one-gpu
line "one GPU, models never timed" docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv \
    tests/data/2026-11-26-h200-heldout
line "one GPU, widths 8192 and 12288" docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv \
    docs/validation/2026-11-27-h200-calibrate-operands/wide
line "2 and 4 GPUs, GPT-2 and LLaMA" "" tests/data/2026-11-26-h200-calibrated/two-gpu tests/data/2026-11-26-h200-calibrated/four-gpu
line "2 GPUs, OLMo-1B and Yi-6B" "$dense" docs/validation/2026-11-27-h200x2-heldout-new/olmo docs/validation/2026-11-27-h200x2-heldout-new/yi
line "MoE pools set (22)" "$moe" tests/data/2026-11-28-moe-pools/olmoe-4l tests/data/2026-11-28-moe-pools/mixtral-2l
line "MoE host-issue set (22)" "$moe" tests/data/2026-11-28-moe-host-issue/olmoe-4l tests/data/2026-11-28-moe-host-issue/mixtral-2l
line "MoE overlap-classes after" "$moe" tests/data/2026-11-28-overlap-classes/after
rm -f "$without" "$out"
