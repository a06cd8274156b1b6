#!/usr/bin/env bash
# The MoE / expert-parallel validation on 2 x H100 (docs/validation/2026-11-26-h100x2-ep):
# kernel checks, loss equivalence with one GPU, the timed runs against the planner and
# validate --plan with an EP 2 plan.  Run from a folder laid out as the repository's root
# (build/, hwdb/, models/, tests/gpu/parallel_equivalence.sh, plan-ep2.json):
#   OUT=DIR bash scripts/epv_run.sh [ROOT] [PARTS]
# PARTS: any of kernels,equivalence,timed,plan (default all).  Every output goes under $OUT/epv.
set -u
R=${1:-$(cd "$(dirname "$0")/.." && pwd)}
PARTS=${2:-kernels,equivalence,timed,plan}
BIN=$R/build/sextant-gpu
O=${OUT:-/tmp}/epv
mkdir -p "$O"
export NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nvcc --version 2>/dev/null | tail -1; } > "$O/device.txt" 2>&1
want() { [[ ,$PARTS, == *,$1,* ]]; }
if want kernels; then
  "$R/build/gpu/test_moe_kernels" > "$O/test_moe_kernels.txt" 2>&1; echo "rc $?" >> "$O/test_moe_kernels.txt"
  "$BIN" check-gradients > "$O/check_gradients.txt" 2>&1; echo "rc $?" >> "$O/check_gradients.txt"
fi
if want equivalence; then
  # the script's own verdicts (MoE layouts only), then the loss curves kept for the report
  ONLY=ep bash "$R/tests/gpu/parallel_equivalence.sh" "$BIN" h100-sxm > "$O/equivalence.txt" 2>&1
  echo "rc $?" >> "$O/equivalence.txt"
  E="moe-test --gpu h100-sxm --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --lr 1e-3 --lr-warmup 3"
  "$BIN" train $E --losses "$O/loss_one.txt" > "$O/eq_one.log" 2>&1
  "$BIN" train $E --dp 2 --ep 2 --losses "$O/loss_ep2.txt" > "$O/eq_ep2.log" 2>&1
  # a dense layout through the changed step, against its one-GPU run
  ONLY='^dp2$' bash "$R/tests/gpu/parallel_equivalence.sh" "$BIN" h100-sxm > "$O/equivalence_dense.txt" 2>&1
  echo "rc $?" >> "$O/equivalence_dense.txt"
fi
if want timed; then
  T="moe-test --gpu h100-sxm --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3"
  "$BIN" train $T --csv "$O/one.csv" > "$O/timed_one.log" 2>&1
  "$BIN" train $T --dp 2 --ep 2 --csv "$O/ep2.csv" > "$O/timed_ep2.log" 2>&1
  "$BIN" train $T --dp 2 --csv "$O/dp2.csv" > "$O/timed_dp2.log" 2>&1
fi
if want plan; then
  "$BIN" train --plan "$R/plan-ep2.json" --steps 20 --warmup 5 > "$O/plan_ep2.log" 2>&1
  echo "rc $?" >> "$O/plan_ep2.log"
  # bad input: one line each
  "$BIN" train moe-test --dp 2 --ep 3 > "$O/bad_input.txt" 2>&1
  "$BIN" train gpt2 --dp 2 --ep 2 >> "$O/bad_input.txt" 2>&1
  "$BIN" train moe-test --tp 2 --ep 1 >> "$O/bad_input.txt" 2>&1
fi
ls -la "$O" > "$O/files.txt"
