#!/bin/bash
# fit/heldout.sh H100_OVERLAY: the H100 sets no fit has seen, priced with it (fit-power's "before" column), from the
# repository root: 2 x H100 unseen and the published H100 rows (docs/validation/2026-11-27-gemm-clock-time/heldout.sh),
# the 21 dense two-H100 runs of OLMo-1B and Yi-6B shapes (docs/validation/2026-11-27-h100x2-heldout-new), and this
# report's eight one-GPU steps (poll/).
set -u
O=$1
Z=docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv
bash docs/validation/2026-11-27-gemm-clock-time/heldout.sh hwdb/measured/h200.csv "$O" | grep -v 'H200\|Qwen\|of them'
before() { build/sextant fit-power "$@" --out /tmp/heldout-$$.csv | sed -n 's/^before (the overlay as given): //p'; rm -f /tmp/heldout-$$.csv; }
N=docs/validation/2026-11-27-h100x2-heldout-new
R=$(ls $N/olmo/*.csv $N/yi/*.csv | grep -v moe | paste -sd, -)
echo "2 x H100 OLMo and Yi shapes, dense (21): $(before --gpu h100-sxm --calibration "$O" --models $N/zoo_heldout.csv --runs "$R")"
R=$(ls docs/validation/2026-11-27-h100-calibrate-operands/poll/*.csv | paste -sd, -)
echo "this report's one-GPU steps (8, 3 models): $(before --gpu h100-sxm --calibration "$O" --models $Z --runs "$R")"
