#!/usr/bin/env bash
# One device call on one H100: the cross-entropy as one thread-block cluster per row (then opt-in,
# layouts 5-7).  Results land in $OUT/ce; it ran on 2026-11-24
# (docs/validation/2026-11-24-h100-step/ce-cluster/), and clusters became the default.
#   test_kernels --ce (full sizes), compute-sanitizer memcheck and racecheck on --ce --quick,
#   bench_kernels (whole table), bench_kernels --embedding --sweep,
#   LLaMA 3.2 1B with fused attention at micro-batch 4 (the cross-entropy in the step), with
#   the overlay calibrate wrote on an H100 on 2026-11-23 (CAL), with the default cross-entropy
#   and with SEXTANT_CE_LAYOUT=5 (clusters).
set -u
. "$(dirname "$0")/device_env.sh"
CAL=${CAL:-docs/validation/2026-11-23-h100-clock-scaled/final/kernels/h100-sxm-unscaled.csv}
R=$OUT/ce; mkdir -p "$R"
device_record "$R"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 80 build/gpu/test_kernels --ce > "$R/test_ce.log" 2>&1; step test_ce $?
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 90 "$SAN" --tool memcheck build/gpu/test_kernels --ce --quick > "$R/memcheck.log" 2>&1; step memcheck $?
timeout 90 "$SAN" --tool racecheck build/gpu/test_kernels --ce --quick > "$R/racecheck.log" 2>&1; step racecheck $?
timeout 150 build/gpu/bench_kernels > "$R/bench_kernels.log" 2>&1; step bench $?
timeout 90 build/gpu/bench_kernels --embedding --sweep > "$R/bench_embedding_sweep.log" 2>&1; step sweep $?
timeout 90 build/sextant-gpu train llama3.2-1b --gpu h100-sxm --mbs 4 --seq 2048 --steps 30 --attention flash \
  --calibration "$CAL" --csv "$R/flash_llama3.2-1b_mbs4.csv" > "$R/flash_llama3.2-1b_mbs4.log" 2>&1; step train $?
SEXTANT_CE_LAYOUT=5 timeout 90 build/sextant-gpu train llama3.2-1b --gpu h100-sxm --mbs 4 --seq 2048 --steps 30 --attention flash \
  --calibration "$CAL" --csv "$R/flash_llama3.2-1b_mbs4_cluster.csv" > "$R/flash_llama3.2-1b_mbs4_cluster.log" 2>&1; step train_cluster $?
tail -3 "$R/test_ce.log"; tail -3 "$R/memcheck.log"; tail -3 "$R/racecheck.log"
grep cross_entropy "$R/bench_kernels.log"; grep -E "mean %copy" "$R/bench_kernels.log"
grep -E "step time|cross_entropy|loss " "$R"/flash_llama3.2-1b_mbs4*.log
