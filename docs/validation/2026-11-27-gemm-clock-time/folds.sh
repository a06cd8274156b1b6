#!/bin/bash
# docs/validation/2026-11-27-gemm-clock-time/folds.sh: each of the H100 fit set's 13 models left out, the clock time's
# regression and the two power terms fitted on the other twelve (what fit-power's held-out column uses), from the
# repository root: one line per fold.
set -eu
runs=$(SEXTANT=echo scripts/fit_power_sets.sh h100-sxm hwdb/measured/h100-sxm.csv /dev/null | tr ' ' '\n' | grep '\.csv,' | tr , '\n')
for model in $(for f in $runs; do awk -F, 'NR==2 {print $1}' "$f"; done | sort -u); do
    keep=$(for f in $runs; do [ "$(awk -F, 'NR==2 {print $1}' "$f")" = "$model" ] || echo "$f"; done | paste -sd, -)
    out=$(build/sextant fit-power --gpu h100-sxm --calibration hwdb/measured/h100-sxm.csv \
          --models docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv --runs "$keep" --out /tmp/folds-$$.csv)
    printf '%-16s %s | %s\n' "$model" "$(echo "$out" | sed -n 's/^clock time (\(.*\)): factor [0-9.]* -> \([0-9.]*\), exponent [0-9.]* -> \([0-9.]*\),.*/K \2 b \3 (\1)/p')" \
        "$(echo "$out" | sed -n 's/^clock exponent [0-9.]* -> \([0-9.]*\), fused attention energy [0-9.]* -> \([0-9.]*\) pJ.*/gamma \1, e_attention \2 pJ/p')"
done
rm -f /tmp/folds-$$.csv
