#!/usr/bin/env bash
# The MoE / expert-parallel validation on 2 GPUs (docs/validation/2026-11-26-h200x2-ep):
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
# the planner's row for the GPU here, and its measured overlay where hwdb has one
GPU=h100-sxm; CAL="--calibration $R/hwdb/measured/h100-sxm.csv"
if nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200; then GPU=h200; CAL=; fi
echo "planner GPU: $GPU ${CAL:-(hwdb defaults: no measured overlay)}" >> "$O/device.txt"
if want kernels; then
  "$R/build/gpu/test_moe_kernels" > "$O/test_moe_kernels.txt" 2>&1; echo "rc $?" >> "$O/test_moe_kernels.txt"
fi
if want equivalence; then
  # the script's own verdicts (MoE layouts only), then the loss curves kept for the report
  ONLY=ep bash "$R/tests/gpu/parallel_equivalence.sh" "$BIN" $GPU > "$O/equivalence.txt" 2>&1
  echo "rc $?" >> "$O/equivalence.txt"
  E="moe-test --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --lr 1e-3 --lr-warmup 3"
  "$BIN" train $E --losses "$O/loss_one.txt" > "$O/eq_one.log" 2>&1
  "$BIN" train $E --dp 2 --ep 2 --losses "$O/loss_ep2.txt" > "$O/eq_ep2.log" 2>&1
  "$BIN" train $E --dp 2 --losses "$O/loss_dp2.txt" > "$O/eq_dp2.log" 2>&1
  SEXTANT_MOE_GEMM=ex "$BIN" train $E --dp 2 --ep 2 --losses "$O/loss_ep2_ex.txt" > "$O/eq_ep2_ex.log" 2>&1
  # dense layouts through the changed step, against their one-GPU runs (a higher learning rate, so
  # that the one-GPU run's loss falls by train's margin in 12 steps)
  EXTRA="--lr 3e-4 --lr-warmup 3" ONLY='^(dp2|tp2)$' bash "$R/tests/gpu/parallel_equivalence.sh" "$BIN" $GPU \
    > "$O/equivalence_dense.txt" 2>&1
  echo "rc $?" >> "$O/equivalence_dense.txt"
fi
if want timed; then
  T="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3 $CAL"
  "$BIN" train $T --csv "$O/one.csv" > "$O/timed_one.log" 2>&1
  "$BIN" train $T --dp 2 --ep 2 --csv "$O/ep2.csv" > "$O/timed_ep2.log" 2>&1
  "$BIN" train $T --dp 2 --csv "$O/dp2.csv" > "$O/timed_dp2.log" 2>&1
  # the expert GEMMs through cublasGemmEx, as the first run had them
  SEXTANT_MOE_GEMM=ex "$BIN" train $T --dp 2 --ep 2 --csv "$O/ep2_ex.csv" > "$O/timed_ep2_ex.log" 2>&1
  SEXTANT_MOE_GEMM=ex "$BIN" train $T --csv "$O/one_ex.csv" > "$O/timed_one_ex.log" 2>&1
  # twice the tokens a micro-batch: larger expert GEMMs, the same exchange pattern
  T8=${T/--mbs 4 --gbs 16/--mbs 8 --gbs 32}
  "$BIN" train $T8 --csv "$O/one_mbs8.csv" > "$O/timed_one_mbs8.log" 2>&1
  "$BIN" train $T8 --dp 2 --ep 2 --csv "$O/ep2_mbs8.csv" > "$O/timed_ep2_mbs8.log" 2>&1
fi
if want plan; then
  "$BIN" train --plan "$R/plan-ep2.json" --gpu $GPU --steps 20 --warmup 5 $CAL > "$O/plan_ep2.log" 2>&1
  echo "rc $?" >> "$O/plan_ep2.log"
  # bad input: one line each
  "$BIN" train moe-test --dp 2 --ep 3 > "$O/bad_input.txt" 2>&1
  "$BIN" train gpt2 --dp 2 --ep 2 >> "$O/bad_input.txt" 2>&1
  "$BIN" train moe-test --tp 2 --ep 1 >> "$O/bad_input.txt" 2>&1
  "$BIN" train moe-test --dp 2 --ep 2 --moe-imbalance 0.5 >> "$O/bad_input.txt" 2>&1
fi
ls -la "$O" > "$O/files.txt"
