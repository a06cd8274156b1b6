#!/bin/bash
# docs/validation/2026-11-27-gemm-accumulate/sets.sh SEXTANT H200_OVERLAY H100_OVERLAY: every recorded set no fit has seen, re-priced
# (fit-power's "before" column, the overlays as given), from the repository root: the held-out sets of
# docs/validation/2026-11-27-gemm-clock-time/heldout.sh, the OLMo/Yi two-GPU runs on both GPUs, the wide one-GPU steps.
S=$1; H200=$2; H100=$3
before() { "$S" fit-power "$@" --out /tmp/as-$$.csv | sed -n 's/^before (the overlay as given): //p'; rm -f /tmp/as-$$.csv; }
bash docs/validation/2026-11-27-gemm-clock-time/heldout.sh "$H200" "$H100" "$S" 2>&1 | grep -v "^ "
N=docs/validation/2026-11-27-h200x2-heldout-new
echo "2 x H200 OLMo/Yi (21): $(before --gpu h200 --calibration "$H200" --models docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv --runs "$(ls $N/olmo/*.csv $N/yi/*.csv | grep -v moe | paste -sd, -)")"
N2=docs/validation/2026-11-27-h100x2-heldout-new
echo "2 x H100 OLMo/Yi: $(before --gpu h100-sxm --calibration "$H100" --models $N2/zoo_heldout.csv --runs "$(ls $N2/*/*.csv 2>/dev/null | grep -v moe | paste -sd, -)")"
echo "wide 5 (H200): $(before --gpu h200 --calibration "$H200" --models docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv --runs "$(ls docs/validation/2026-11-27-h200-calibrate-operands/wide/*.csv | paste -sd, -)")"
W=docs/validation/2026-11-27-h100-heldout-wide
echo "wide (H100): $(before --gpu h100-sxm --calibration "$H100" --models $W/zoo_heldout.csv --runs "$(ls $W/*/*.csv 2>/dev/null | paste -sd, -)")"
