#!/usr/bin/env bash
# One device call on one H100: what `make gpu-test` runs on one GPU, on the session's final
# binaries (test_kernels in full, check-gradients, tests/gpu/calibrate_check.sh; the parallel
# equivalence skips below 2 GPUs), plus the cross-entropy rows of bench_kernels.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/gputest; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
git log -1 --format=%h > "$R/commit.txt" 2>/dev/null
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 330 build/gpu/test_kernels > "$R/test_kernels.log" 2>&1; step test_kernels $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 150 bash tests/gpu/calibrate_check.sh build > "$R/calibrate_check.log" 2>&1; step calibrate_check $?
tail -2 "$R/test_kernels.log"; cat "$R/calibrate_check.log"
tar -C "$OUT" -cf "$OUT/gputest.tar" gputest && rm -rf "$R"
