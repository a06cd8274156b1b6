#!/usr/bin/env bash
# validate as a new user types it, without --gpu and --calibration (the card's hwdb row and its shipped overlay,
# hwdb/measured/<row>.csv), against the same run with --calibration none (the hwdb defaults), and validate --ops
# likewise; then the equivalence layouts ONLY picks (default: GPT-2 PP 4 x VPP 3 and the MoE model's) against one
# GPU.  Run from the repository root with build/sextant and build/sextant-gpu carried:
#   OUT=DIR bash scripts/run_default_overlay.sh
#   OUT=DIR ONLY='^llama' bash scripts/run_default_overlay.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start default-overlay
V="gpt2 --mbs 8 --seq 1024 --steps 20 --warmup 3"
run default 180 build/sextant validate $V --csv "$R/default.csv"
run none 180 build/sextant validate $V --calibration none --csv "$R/none.csv"
run ops 180 build/sextant validate gpt2 --ops --mbs 8 --seq 1024 --csv "$R/ops.csv"
for n in default none ops; do
  say "$n: $(grep -m1 '^# priced' "$R/$n.log" || echo 'no overlay line')"
  grep -m1 -E '^step time' "$R/$n.log" | sed "s/^/  $n: /" >> "$S"
done
export ONLY=${ONLY:-'pp4\+vpp3|^moe-test '}
run equivalence 380 tests/gpu/parallel_equivalence.sh build/sextant-gpu "$GPU"
grep -E '^(PASS|FAIL)|^parallel_equivalence' "$R/equivalence.log" >> "$S"
keep
