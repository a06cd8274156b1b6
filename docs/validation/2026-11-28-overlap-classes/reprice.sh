#!/bin/sh
# Every recorded set this report moves, priced with the shipped overlays (fit-power's "before": nothing refitted), one
# summary line each, then each run of the MoE set at random and of this report's eight runs.  Run from the repository
# root after make; at 926ba6a (before the experts' figure) it prints the "before" columns of README.md.
S=${1:-build/sextant}
ZM=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
ZN=docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv
set_of() { # name gpu zoo dir...
  name=$1 g=$2 z=$3; shift 3
  R=$(for d in "$@"; do ls $d/*.csv; done | grep -v "/tl_\|issue_" | paste -sd, -)
  zf=""; [ -n "$z" ] && zf="--models $z"
  $S fit-power --gpu $g --calibration hwdb/measured/$g.csv $zf --runs $R --out /tmp/reprice_$$.csv 2>/dev/null > /tmp/reprice_$$.txt
  printf '%-34s %s\n' "$name" "$(grep '^before' /tmp/reprice_$$.txt | sed 's/before (the overlay as given): //')"
  [ "${RUNS:-0}" = 1 ] && grep -E '\.csv ' /tmp/reprice_$$.txt | cut -c1-75 | sed 's/^/    /'
  rm -f /tmp/reprice_$$.csv /tmp/reprice_$$.txt
}
T=tests/data
RUNS=1 set_of "MoE at random, one machine" h200 $ZM $T/2026-11-28-moe-host-issue/olmoe-4l $T/2026-11-28-moe-host-issue/mixtral-2l
RUNS=1 set_of "this report, MoE" h200 $ZM $T/2026-11-28-overlap-classes/olmoe-4l $T/2026-11-28-overlap-classes/mixtral-2l
RUNS=1 set_of "this report, dense" h200 $ZN $T/2026-11-28-overlap-classes/olmo-1b-8l $T/2026-11-28-overlap-classes/yi-6b-6l
set_of "MoE, untrained router" h200 $ZM $T/2026-11-28-expert-algos/olmoe-4l $T/2026-11-28-expert-algos/mixtral-2l
set_of "MoE at random, two machines" h200 $ZM $T/2026-11-28-moe-random-all/olmoe-4l $T/2026-11-28-moe-random-all/mixtral-2l
set_of "OLMo and Yi, 2 x H200" h200 $ZN docs/validation/2026-11-27-h200x2-heldout-new/olmo docs/validation/2026-11-27-h200x2-heldout-new/yi
set_of "ten layouts and Mixtral, 2 x H200" h200 $ZM $T/2026-11-27-h200x2-zero-overhead/rerun
set_of "four H200s" h200 "" $T/2026-11-26-h200-calibrated/four-gpu
set_of "2 x H100 unseen" h100-sxm "" $T/2026-11-26-h100x2-unseen/rerun
RUNS=1 set_of "OLMoE, 2 x H100 (first build)" h100-sxm $ZM docs/validation/2026-11-27-moe-weighted-swiglu/h100-first-build/olmoe-4l
