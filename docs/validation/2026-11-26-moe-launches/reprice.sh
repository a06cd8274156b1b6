#!/usr/bin/env bash
# Every recorded step of the MoE test models whose expert GEMMs ran as one cuBLAS(Lt) call per expert (the shipped
# validator's ways: one stream or four), re-priced by `sextant fit-power` (its "before" column: the overlay as
# shipped) with the binary given, set by set, then over all of them.  From the repository root:
#   bash docs/validation/2026-11-26-moe-launches/reprice.sh [SEXTANT] > FILE
# SEXTANT defaults to build/sextant; the "before" figures of README.md came from the binary of 16c6808 with this
# change's fit_power.c (which reads a run's EP from its log), the "after" ones from this change's.
set -eu
S=${1:-build/sextant}
V=docs/validation; A=$V/archive
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
# pair GPU REPORT CSV...: each CSV whose log beside it has NVML's "power:" line, named REPORT.CSV
pair() {
  local gpu=$1 report=$2 c l; shift 2; mkdir -p "$W/$gpu"
  for c in "$@"; do
    l=${c%.csv}.log
    if [ -f "$l" ] && grep -q '^power:' "$l"; then
      ln -sf "$PWD/$c" "$W/$gpu/$report.$(basename "$c")"; ln -sf "$PWD/$l" "$W/$gpu/$report.$(basename "$l")"
    fi
  done
}
pair h100-sxm ep-messages $V/2026-11-26-h100x2-ep-messages/raw/t*.csv
pair h100-sxm expert-streams $V/2026-11-26-h100x2-expert-streams/raw/t*.csv
pair h100-sxm cpep $V/2026-11-26-h100x2-cpep/raw/t_moe_*.csv
pair h100-sxm zero-order $V/2026-11-26-h100x2-zero-order/timeline/t_moe_*.csv
pair h100-sxm timeline-one $A/2026-11-26-h100-timeline-one/raw/moe-test_*.csv
pair h100-sxm expert-rows $A/2026-11-26-h100-expert-rows/raw/t*_old_*.csv $A/2026-11-26-h100-expert-rows/tune/t*_old_*.csv \
  $A/2026-11-26-h100-expert-rows/spread/*.csv
pair h100-sxm heldout-lr1e-3 $V/2026-11-26-moe-launches/lr1e-3/t_*.csv
pair h100-sxm heldout-lr1e-4 $V/2026-11-26-moe-launches/lr1e-4/t_*.csv
pair h200 calibrated $V/2026-11-26-h200x2-calibrated/timed/t_moe_*.csv
pair h200 cpep $V/2026-11-26-h200x2-cpep/raw/t_moe_*.csv
pair h200 moe-grouped $A/2026-11-26-h200x2-moe-grouped/raw/lt_*.csv
pair h200 host-ahead $A/2026-11-26-h200x2-host-ahead/raw/p_moe_*.csv
for d in "$W"/*; do
  gpu=$(basename "$d")
  echo "== $gpu"
  "$S" fit-power --gpu "$gpu" --calibration hwdb/measured/$gpu.csv --models $V/2026-11-26-moe-launches/zoo_moe_heldout.csv --runs "$(ls "$d"/*.csv | paste -sd, -)" \
    --out "$W/out.csv" | grep -E '\.csv ' | awk '{ print $1, $2, $3, $4, $(NF-2), $(NF-1) }' | tee -a "$W/all.txt"
done
# columns: run, measured, predicted, error, MHz measured, MHz predicted
# the recorded steps (the 42 the change was derived on), then the held-out ones of this report (heldout-*)
summary() {
awk '{ e = $4; sub(/%$/, "", e); e += 0; a = e < 0 ? -e : e; n++; s += a; ss += e; if (a > w) { w = a; ws = e; wr = $1 }
       c = $6 / $5 - 1; cs += c; ca += (c < 0 ? -c : c) }
     END { printf "%d runs: step mean |error| %.2f%%, signed %+.2f%%, worst %+.1f%% (%s); SM clock %.2f%%, %+.2f%%\n",
                  n, s / n, ss / n, ws, wr, 100 * ca / n, 100 * cs / n }'
}
grep -v '^heldout-' "$W/all.txt" | summary
grep '^heldout-' "$W/all.txt" | summary
grep '^heldout-lr1e-4' "$W/all.txt" | summary
