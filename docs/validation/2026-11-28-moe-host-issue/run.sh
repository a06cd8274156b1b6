#!/usr/bin/env bash
# The MoE held-out set with the random route, measured again on one 2 x H200 machine with today's validator (the
# router kernels of df062f2, the random route's EP imbalance priced as drawn), and where the host issues OLMoE's
# steps: the profiling step's timeline of its one GPU, TP 2 + SP and PP 2 layouts with each op call's host issue
# beside its GPU times, and the machine's own `calibrate --issue` before and after.  From the repository root with
# build/sextant-gpu and .deps/lib carried:
#   OUT=DIR PART=olmoe bash docs/validation/2026-11-28-moe-host-issue/run.sh    # issue, OLMoE's 11 layouts, issue
#   OUT=DIR PART=mixtral bash docs/validation/2026-11-28-moe-host-issue/run.sh  # Mixtral's 11 layouts
# -> $OUT/summary.txt, $OUT/heldout-2gpu.tar (logs, CSVs, timelines), $OUT/issue_{1,2}.{csv,txt}, $OUT/gpu.txt
set -u
. scripts/device_env.sh
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
export SEXTANT_MOE_ROUTE=random
case ${PART:?PART is olmoe or mixtral} in
olmoe)
  build/sextant-gpu calibrate --issue --gpu h200 --out "$OUT/issue_1.csv" > "$OUT/issue_1.txt" 2>&1
  LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=olmoe-4l TIMELINE='^(1gpu|tp2sp|pp2)$' bash scripts/run_heldout_2gpu.sh
  build/sextant-gpu calibrate --issue --gpu h200 --out "$OUT/issue_2.csv" > "$OUT/issue_2.txt" 2>&1 ;;
mixtral)
  LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=mixtral-2l bash scripts/run_heldout_2gpu.sh ;;
*) echo "PART=$PART: expected olmoe or mixtral" >&2; exit 2 ;;
esac
