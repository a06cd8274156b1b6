#!/usr/bin/env bash
# Device run for issue 24 items 7 and 4 on 2 GPUs (docs/validation/2026-11-26-h100x2-loss-fp8):
#   1. tests/gpu/parallel_equivalence.sh with the loss-trend check (both GPUs);
#   2. on GPU 0: the FP8 kernels' test, check-fp8, tests/gpu/fp8_loss.sh (keeping its logs),
#      and bf16 against FP8 step times at larger shapes;
#      on GPU 1 at the same time: calibrate --warm --no-step-fit for GPT-2's shapes (the FP8 table
#      and fp8_gemm_relative_efficiency).
# Run from the repository root with the binaries in $C/build (default .carry/loss) and the
# branch's hwdb/ and models/ beside them in $C (the binaries read the data from there);
# results in $OUT/results.tar.gz.
set -u
C=${C:-.carry/loss}
G=$C/build/sextant-gpu
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
export NCCL_NVLS_ENABLE=0
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv; cat $C/commit.txt; } > "$R/device.txt" 2>&1
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in *H200*) GPU=h200 ;; *) GPU=h100-sxm ;; esac
step() { echo "$(date -u +%T) $1 rc=$2" | tee -a "$R/steps.txt"; }

t0=$(date +%s)
timeout 240 bash $C/parallel_equivalence.sh $G $GPU > "$R/equivalence.log" 2>&1; step equivalence $?
echo "equivalence took $(( $(date +%s) - t0 )) s" >> "$R/steps.txt"

( export CUDA_VISIBLE_DEVICES=1
  timeout 150 $G calibrate --gpu $GPU --gemm-models gpt2 --warm --no-step-fit --out "$R/calibration.csv" \
    > "$R/calibrate.log" 2>&1; step calibrate $? ) &
( export CUDA_VISIBLE_DEVICES=0
  timeout 20 $C/test_fp8 > "$R/test_fp8.log" 2>&1; step test_fp8 $?
  CUBLASLT_LOG_LEVEL=2 timeout 60 $G check-fp8 > "$R/check_fp8.log" 2>&1; step check_fp8 $?
  KEEP="$R/fp8" timeout 90 bash $C/fp8_loss.sh $G $GPU > "$R/fp8_loss.log" 2>&1; step fp8_loss $?
  for p in bf16 fp8; do
    timeout 60 $G train llama3.2-1b --gpu $GPU --mbs 4 --seq 2048 --steps 20 --attention flash --precision $p \
      > "$R/speed_llama3.2-1b_$p.log" 2>&1; step "speed_llama_$p" $?
    timeout 60 $G train gpt2-medium --gpu $GPU --mbs 16 --seq 1024 --steps 20 --attention flash --precision $p \
      > "$R/speed_gpt2-medium_$p.log" 2>&1; step "speed_gpt2m_$p" $?
  done ) &
wait
echo "all took $(( $(date +%s) - t0 )) s" >> "$R/steps.txt"
tar czf "${OUT:-/tmp/out}/results.tar.gz" -C "$(dirname "$R")" r
cat "$R/steps.txt"; tail -40 "$R/equivalence.log"; cat "$R/fp8_loss.log" "$R/test_fp8.log" | tail -40
grep -E "FP8 GEMMs|fp8_gemm" "$R/calibrate.log" | tail -3
grep -hE "^loss|loss trend|step time|^# GEMMs|rror" "$R"/speed_*.log; cat "$R/check_fp8.log" | tail -15
