#!/usr/bin/env bash
# make gpu-test's checks, in its order, on binaries built on the development machine and carried
# in BIN_DIR (default .carry/lead: sextant-gpu, sextant, gpu/test_reference, gpu/test_kernels,
# gpu/test_fp8, gpu/test_moe_kernels), on a lent 2-GPU machine:
#   kernels       test_reference, test_kernels (the CP ring's blocks included), test_fp8, test_moe_kernels
#   gradients     sextant-gpu check-gradients and check-fp8
#   equivalence   tests/gpu/parallel_equivalence.sh (every layout against one GPU: TP, SP, PP, DP, ZeRO,
#                 CP 2, EP 2) and tests/gpu/fp8_loss.sh (FP8 against bf16, 12 steps)
# calibrate_check.sh is left out (it times shapes for minutes). Run from the repository root:
#   OUT=DIR bash scripts/run_gpu_test.sh [kernels|equivalence]
# (one of the two halves alone, for machines whose calls are held under ten minutes; both without it)
# Results: $OUT/summary.txt (one line per check) and $OUT/gpu-test.tar (every log and loss file).
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
device_begin gpu-test
GPU=h100-sxm
grep -q H200 "$R/gpu.txt" && GPU=h200
check() {   # NAME TIMEOUT COMMAND...: its log in $R/NAME.log, PASS or FAIL in the summary
    local name=$1 t=$2; shift 2
    local start=$(date +%s)
    timeout "$t" "$@" > "$R/$name.log" 2>&1
    local rc=$?
    say "$([ $rc -eq 0 ] && echo PASS || echo "FAIL rc=$rc") $name ($(( $(date +%s) - start )) s)"
    keep
}
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt"); hwdb GPU $GPU"
PHASE=${1:-all}
if [ "$PHASE" != equivalence ]; then
check test_reference 60 "$B/gpu/test_reference"
check test_kernels 300 "$B/gpu/test_kernels"   # 178 s of a 180 s limit on 2 x H200 (2026-11-26)
check test_fp8 60 "$B/gpu/test_fp8"
check test_moe_kernels 60 "$B/gpu/test_moe_kernels"
check check_gradients 120 "$B/sextant-gpu" check-gradients
check check_fp8 60 "$B/sextant-gpu" check-fp8
fi
[ "$PHASE" = kernels ] && exit 0
KEEP="$R/fp8-runs" check fp8_loss 150 tests/gpu/fp8_loss.sh "$B/sextant-gpu" "$GPU"
# 65 layouts took 506 s on 4 x H200 (2026-11-26-h200x4-gpu-test), the 2-GPU ones under 330
check parallel_equivalence $([ "$(nvidia-smi -L | grep -c '^GPU')" -ge 4 ] && echo 590 || echo 330) \
  tests/gpu/parallel_equivalence.sh "$B/sextant-gpu" "$GPU"
tail -n 40 "$R/parallel_equivalence.log" > "$OUT/equivalence_tail.txt"
keep
