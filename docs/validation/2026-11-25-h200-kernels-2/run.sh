#!/usr/bin/env bash
# One H200 call with the day's final kernels: the norm tests (the position-gradient backward and
# the fp16 norms among them) and the elementwise tests (bf16 and fp16), then the whole bandwidth
# table of bench_kernels.  Binaries built on the development machine.  Everything in $OUT/h200.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/h200; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 150 build/gpu/test_kernels --norm > "$R/test_norm.log" 2>&1; step test_norm $?
timeout 60 build/gpu/test_kernels --elementwise > "$R/test_elementwise.log" 2>&1; step test_elementwise $?
timeout 200 build/gpu/bench_kernels > "$R/bench_kernels.log" 2>&1; step bench_kernels $?
grep -h "checks" "$R"/test_*.log
grep -E "layer0|layernorm_bwd_pos\(dx\+=\).*\(dwpe|apply alone|_f16|^layernorm_bwd |^cross_entropy" "$R/bench_kernels.log" | cut -c1-150
cd "$OUT" && tar cf h200.tar h200 && rm -rf h200
