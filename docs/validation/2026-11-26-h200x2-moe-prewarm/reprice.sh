#!/usr/bin/env bash
# This report's ten MoE steps as run with the final binaries (final/, recompute/runs/), re-priced by `sextant fit-power`
# (its "before" column: the overlay as given) with the H200 overlay given (default the shipped one).  From the root:
#   bash docs/validation/2026-11-26-h200x2-moe-prewarm/reprice.sh [OVERLAY] > FILE
# The README's "without gemm_issue_us" column is the shipped overlay less its gemm_issue_us row.
set -eu
OVERLAY=${1:-hwdb/measured/h200.csv}
D=docs/validation/2026-11-26-h200x2-moe-prewarm
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for c in $D/final/new_*.csv $D/recompute/runs/new_*.csv; do
  ln -s "$PWD/$c" "$W/$(basename "$c")"; ln -s "$PWD/${c%.csv}.log" "$W/$(basename "${c%.csv}").log"
done
"${SEXTANT:-build/sextant}" fit-power --gpu h200 --calibration "$OVERLAY" --models docs/validation/2026-11-26-moe-launches/zoo_moe_heldout.csv \
  --runs "$(ls "$W"/*.csv | paste -sd, -)" --out "$W/out.csv" | grep -E '\.csv ' | awk '{ print $1, $2, $3, $4 }' > "$W/all.txt"
cat "$W/all.txt"
awk '{ e = $4; sub(/%$/, "", e); e += 0; a = e < 0 ? -e : e; n++; s += a; ss += e; if (a > w) { w = a; ws = e; wr = $1 } }
     END { printf "%d runs: step mean |error| %.2f%%, signed %+.2f%%, worst %+.1f%% (%s)\n", n, s / n, ss / n, ws, wr }' "$W/all.txt"
