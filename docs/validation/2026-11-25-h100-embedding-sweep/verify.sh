#!/usr/bin/env bash
# One device call on one H100, after the default window became 12 rows from C = 2048 up:
# test_kernels --embedding, compute-sanitizer memcheck on its quick set, then bench_kernels
# --embedding five times (300 timed runs a row).
set -u
R=$OUT/verify; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 200 build/gpu/test_kernels --embedding > "$R/test_embedding.log" 2>&1; echo "test rc=$?"; tail -2 "$R/test_embedding.log"
timeout 150 "$SAN" --tool memcheck --error-exitcode 9 build/gpu/test_kernels --embedding --quick > "$R/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -1 "$R/memcheck.log"
for i in 1 2 3 4 5; do
  timeout 60 build/gpu/bench_kernels --embedding --iters 300 > "$R/bench$i.log" 2>&1; echo "bench $i rc=$?"
done
grep -h "apply alone" "$R"/bench*.log | cut -c1-150
