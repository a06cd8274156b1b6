#!/bin/bash
# One call on a GPU machine: build, check the CPU references, run the GPU tests, run them
# again (small sizes) under compute-sanitizer memcheck and racecheck, then the benchmark.
# Logs go to $OUT (default /tmp/sextant-gpu-out).  Run from the repository root:
#   OUT=/some/dir bash scripts/device_run.sh
set -u -o pipefail
OUT=${OUT:-/tmp/sextant-gpu-out}
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

. "$(dirname "$0")/device_env.sh"
device_record "$OUT"
nvcc --version 2>&1 | tail -2 >> "$OUT/gpu.txt"
cat "$OUT/gpu.txt" "$OUT/date.txt"

if ! make -f kernels/gpu.mk NVCC=nvcc BUILD="$BUILD" -j"$JOBS" 2>&1 | tee "$OUT/build.log"; then
    echo "device_run: build failed"
    exit 1
fi

rc=0
timeout 60 "$BUILD/gpu/test_reference" 2>&1 | tee "$OUT/ref.log" || rc=1
timeout 150 "$BUILD/gpu/test_kernels" "$@" > "$OUT/test.log" 2>&1 || rc=1
{
    for tool in memcheck racecheck; do
        echo "=== compute-sanitizer --tool $tool test_kernels --quick"
        timeout 75 "$SAN" --tool "$tool" --error-exitcode 9 "$BUILD/gpu/test_kernels" --quick 2>&1 | tail -25
        echo "=== $tool rc=${PIPESTATUS[0]}"
    done
} > "$OUT/sanitizer.log" 2>&1
timeout 100 "$BUILD/gpu/bench_kernels" > "$OUT/bench.log" 2>&1 || rc=1

grep -E "^=== " "$OUT/sanitizer.log"
cat "$OUT/test.log" "$OUT/bench.log"
exit $rc
