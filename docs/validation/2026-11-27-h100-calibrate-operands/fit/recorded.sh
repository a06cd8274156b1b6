#!/bin/bash
# fit/recorded.sh OVERLAY_BEFORE OVERLAY_AFTER: the other recorded H100 sets of current reports (two-GPU ZeRO, CP, EP
# and MoE layouts, the one-GPU fitted runs), priced with each overlay (fit-power's "before" column), from the
# repository root.  None of them is in fit-power's 38 steps.
Z=docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv
price() { build/sextant fit-power --gpu h100-sxm --calibration "$1" --models $Z --runs "$2" --out /tmp/recorded-$$.csv 2>&1 |
          sed -n 's/^before (the overlay as given): //p'; rm -f /tmp/recorded-$$.csv; }
for d in docs/validation/2026-11-26-h200x2-zero-side/h100-clear docs/validation/2026-11-25-h100x2-zero/run-before \
         docs/validation/2026-11-26-h100x2-zero-order/order docs/validation/2026-11-26-h100x2-zero-order/timeline \
         docs/validation/2026-11-26-h100x2-cpep/raw docs/validation/2026-11-26-h100x2-cp-pack/raw \
         docs/validation/2026-11-26-h100x2-ep-messages/raw docs/validation/2026-11-26-h100x2-expert-streams/raw \
         docs/validation/2026-11-26-h100x2-moe-grad-overlap/raw tests/data/2026-11-25-h100-fitted-shipped; do
    R=$(grep -l '^[a-z0-9.-]*,h100-sxm,' $d/*.csv | paste -sd, -)
    echo "$d ($(echo "$R" | tr , '\n' | wc -l) runs): $(price "$1" "$R") -> $(price "$2" "$R")"
done
