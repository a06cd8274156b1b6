#!/usr/bin/env bash
# Weight gradients as calibrate times them (beta 0) and as a step runs them (beta 1 into the gradient, bf16 or
# Megatron's fp32), build/dev/gemm_accumulate twice in turn on one card, with nvidia-smi's clock and power every
# 200 ms beside it (docs/validation/2026-11-27-gemm-accumulate).
#   OUT=DIR bash scripts/run_gemm_accumulate.sh   (BIN_DIR: dev/gemm_accumulate; default build)
#   -> $OUT/summary.txt, $OUT/gemm-accumulate.tar (gpu.txt, date.txt, pass1.log, pass2.log, smi.csv)
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-build}
device_begin gemm-accumulate
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
device_sample "$R/smi.csv"
for pass in 1 2; do
    run "pass$pass" 240 "$B/dev/gemm_accumulate"
    grep -v -E '^ |PASS' "$R/pass$pass.log" | tee -a "$S"
done
kill "$SMI_PID" 2>/dev/null
keep
