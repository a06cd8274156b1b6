#!/usr/bin/env bash
# One H100 call: the GELU, SwiGLU and residual-add tests (bf16 and the new fp16 storage), memcheck
# on their quick sizes, and the whole bandwidth table of bench_kernels with the day's code.
# Binaries built on the development machine.  Everything in $OUT/f16.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/f16; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 60 build/gpu/test_kernels --elementwise > "$R/test_elementwise.log" 2>&1; step test_elementwise $?
timeout 60 compute-sanitizer --tool memcheck build/gpu/test_kernels --quick --elementwise > "$R/memcheck.log" 2>&1; step memcheck $?
timeout 200 build/gpu/bench_kernels > "$R/bench_kernels.log" 2>&1; step bench_kernels $?
tail -1 "$R/test_elementwise.log"; grep -E "checks" "$R/test_elementwise.log"; grep -c f16 "$R/test_elementwise.log"
grep "ERROR SUMMARY" "$R/memcheck.log"
grep -E "^(gelu|swiglu|residual|layernorm_fwd|layernorm_bwd |rmsnorm)" "$R/bench_kernels.log" | cut -c1-120
cd "$OUT" && tar cf f16.tar f16 && rm -rf f16
