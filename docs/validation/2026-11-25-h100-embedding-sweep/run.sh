#!/usr/bin/env bash
# One device call on one H100: is the embedding apply's default window (W = 16 rows, Wn = 12, 1024
# channels per block) the best?  bench_kernels --embedding --sweep five times, 300 timed runs a row.
set -u
R=$OUT/sweep; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
for i in 1 2 3 4 5; do
  timeout 100 build/gpu/bench_kernels --embedding --sweep --iters 300 > "$R/sweep$i.log" 2>&1; echo "sweep $i rc=$?"
done
grep -h "apply alone" "$R"/sweep*.log | awk '{print $1, $2, $3, $NF}' | head -3
