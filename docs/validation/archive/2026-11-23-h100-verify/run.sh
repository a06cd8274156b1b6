#!/usr/bin/env bash
# One device call on one H100: the norm backward after its one-epilogue refactor
# (commit 8cb4d9d), the float64 gradient check, and `tests/gpu/calibrate_check.sh`
# (part of `make gpu-test`) for the first time on a GPU; then the norm
# bandwidth rows.  Binaries built on the development machine, carried with .deps/lib.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/verify; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 150 build/gpu/test_kernels --norm > "$R/test_kernels_norm.log" 2>&1; step test_kernels_norm $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 200 bash tests/gpu/calibrate_check.sh build > "$R/calibrate_check.log" 2>&1; step calibrate_check $?
timeout 60 build/gpu/bench_kernels --norm > "$R/bench_norm.log" 2>&1; step bench_norm $?
tar -C "$OUT" -cf "$OUT/verify.tar" verify && rm -rf "$R"
