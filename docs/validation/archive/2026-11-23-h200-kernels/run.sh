#!/bin/bash
# call 2: full tests, sanitizers (quick), the benchmark table, the sweep
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "# command: bash run2.sh (test_reference; test_kernels; compute-sanitizer memcheck/racecheck test_kernels --quick --no-attention; bench_kernels; bench_kernels --sweep)"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2; echo "binaries built with nvcc 13.0.88 (sm_90), static cudart"; date -u; } > $OUT/gpu.txt 2>&1
timeout 30 ./test_reference > $OUT/ref.log 2>&1; echo "ref rc=$?" >> $OUT/ref.log
timeout 100 ./test_kernels > $OUT/test.log 2>&1; echo "test rc=$?" >> $OUT/test.log
{ for tool in memcheck racecheck; do echo "=== compute-sanitizer --tool $tool test_kernels --quick --no-attention"; timeout 35 $SAN --tool $tool --error-exitcode 9 ./test_kernels --quick --no-attention 2>&1 | grep -v PASS | tail -30; echo "=== $tool rc=${PIPESTATUS[0]}"; done; } > $OUT/sanitizer.log 2>&1
timeout 50 ./bench_kernels > $OUT/bench.log 2>&1; echo "bench rc=$?" >> $OUT/bench.log
timeout 55 ./bench_kernels --sweep > $OUT/sweep.log 2>&1; echo "sweep rc=$?" >> $OUT/sweep.log
grep -E "FAIL|checks|rc=" $OUT/test.log $OUT/ref.log | head -30
grep -E "^===" $OUT/sanitizer.log
grep -E "_bwd|copy D2D|mean|rc=" $OUT/bench.log | grep -v flash
grep -E "sweep" $OUT/sweep.log | grep -E "S=0|S=4|kp=1|pf=0 |alone" | cut -c1-40,95-170
