#!/usr/bin/env bash
# The session's last device call on one H100, on the final binaries: what `make gpu-test` runs on
# one GPU (test_kernels in full, check-gradients, tests/gpu/calibrate_check.sh; the parallel
# equivalence needs 2 GPUs), and two short calibrated training runs (GPT-2 fused at mbs 32, the
# LLaMA-style model fused at mbs 4) with the overlay CAL.  Everything in $OUT/final.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
CAL=${CAL:?CAL: an overlay of an earlier calibrate}
R=$OUT/final; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 400 build/gpu/test_kernels > "$R/test_kernels.log" 2>&1; step test_kernels $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 100 bash tests/gpu/calibrate_check.sh build > "$R/calibrate_check.log" 2>&1; step calibrate_check $?
for spec in "gpt2 32 1024" "llama3.2-1b 4 2048"; do
  set -- $spec
  timeout 90 build/sextant-gpu train "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 30 --attention flash \
     --calibration "$CAL" --csv "$R/flash_$1_mbs$2.csv" > "$R/flash_$1_mbs$2.log" 2>&1; step "flash_$1_mbs$2" $?
done
tail -1 "$R/test_kernels.log"; grep checks "$R/test_kernels.log"
tail -2 "$R/check_gradients.log"; tail -1 "$R/calibrate_check.log"
for f in "$R"/flash_*.log; do echo "$(basename $f): $(grep -E '^loss|step time' $f | tr '\n' ' ')"; done
cd "$OUT" && tar cf final.tar final && rm -rf final
