#!/usr/bin/env bash
# The recorded two- and four-GPU steps whose logs give NVML's clock, re-priced with the shipped overlays by
# `sextant fit-power` (its "before" column and clock columns), set by set, then over all of them: the step's and
# the SM clock's error.  From the repository root, with build/sextant:
#   bash docs/validation/2026-11-26-h100x2-zero-order/reprice.sh > docs/validation/2026-11-26-h100x2-zero-order/reprice.txt
# With contention-energy.patch (and a contention_power_fraction row) or stretch.patch applied and build/sextant
# rebuilt, the same command gives the figures of README.md's "Not kept".
set -eu
V=docs/validation; T=tests/data; Z=$V/2026-11-26-h100x2-zero-order
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# pair SET LOGDIR CSV...: each CSV with the log of its name (in LOGDIR, else beside it) that has a "power:" line
pair() {
  local set=$1 logdir=$2 c b l; shift 2; mkdir -p "$W/$set"
  for c in "$@"; do
    b=$(basename "$c" .csv); l=$logdir/$b.log; [ -f "$l" ] || l=$(dirname "$c")/$b.log
    if [ -f "$l" ] && grep -q '^power:' "$l"; then ln -sf "$PWD/$c" "$W/$set/$b.csv"; ln -sf "$PWD/$l" "$W/$set/$b.log"; fi
  done
}
pair h100-sxm:timeline $Z/timeline $Z/timeline/t_llama*.csv
pair h100-sxm:order $Z/order $Z/order/t_*.csv
pair h100-sxm:zero-side $V/2026-11-26-h200x2-zero-side/h100-clear $V/2026-11-26-h200x2-zero-side/h100-clear/t_*.csv
pair h100-sxm:zero $V/2026-11-25-h100x2-zero/run-after $V/2026-11-25-h100x2-zero/run-after/*.csv
pair h100-sxm:unseen $V/2026-11-26-h100x2-unseen/rerun $T/2026-11-26-h100x2-unseen/rerun/*.csv
pair h100-sxm:cpep $V/2026-11-26-h100x2-cpep/raw $V/2026-11-26-h100x2-cpep/raw/*.csv
pair h200:zero-side $V/2026-11-26-h200x2-zero-side/raw $V/2026-11-26-h200x2-zero-side/raw/t_*before.csv \
  $V/2026-11-26-h200x2-zero-side/raw/t_*z1_after.csv $V/2026-11-26-h200x2-zero-side/raw/t_*1gpu.csv
pair h200:timed $V/2026-11-26-h200x2-calibrated/timed $V/2026-11-26-h200x2-calibrated/timed/*.csv
pair h200:four $V/2026-11-26-h200x4-calibrated/layouts $V/2026-11-26-h200x4-calibrated/layouts/*.csv
pair h200:cpep $V/2026-11-26-h200x2-cpep/raw $V/2026-11-26-h200x2-cpep/raw/*.csv
for d in "$W"/*; do
  set=$(basename "$d"); gpu=${set%%:*}
  echo "== $set"
  build/sextant fit-power --gpu "$gpu" --calibration hwdb/measured/$gpu.csv --runs "$(ls "$d"/*.csv | paste -sd, -)" \
    --out "$W/out.csv" | grep -vE "^(sextant fit-power|clock exponent|after|held out|overlay written)" | tee -a "$W/all.txt"
done
# every run: the "before" step error and the clock before, over all sets and over the ZeRO-2 and ZeRO-3 runs
awk '$1 ~ /\.csv$/ && NF >= 9 {
       step = $3 / $2 - 1; clock = $(NF-1) / $(NF-2) - 1; sub(/ms$/, "", step)
       n++; s += (step < 0 ? -step : step); ss += step; c += (clock < 0 ? -clock : clock); cs += clock
       if ($1 ~ /z3/) { n3++; s3 += (step < 0 ? -step : step); ss3 += step; c3 += (clock < 0 ? -clock : clock); cs3 += clock }
       if ($1 ~ /z2/) { n2++; s2 += (step < 0 ? -step : step); ss2 += step; c2 += (clock < 0 ? -clock : clock); cs2 += clock } }
     END { printf "all %d runs: step mean |error| %.2f%%, signed %+.2f%%; SM clock %.2f%%, %+.2f%%\n", n, 100*s/n, 100*ss/n, 100*c/n, 100*cs/n
           printf "ZeRO-3, %d runs: step %.2f%%, %+.2f%%; SM clock %.2f%%, %+.2f%%\n", n3, 100*s3/n3, 100*ss3/n3, 100*c3/n3, 100*cs3/n3
           printf "ZeRO-2, %d runs: step %.2f%%, %+.2f%%; SM clock %.2f%%, %+.2f%%\n", n2, 100*s2/n2, 100*ss2/n2, 100*c2/n2, 100*cs2/n2 }' \
  "$W/all.txt"
