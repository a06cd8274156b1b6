#!/bin/bash
# One GPU-machine call for the fused attention only: build, CPU reference check, the
# attention GPU tests, compute-sanitizer (memcheck, racecheck) on their quick sizes, and the
# attention benchmark table.  Logs to $OUT.  Run from the repository root:
#   OUT=/some/dir bash scripts/attention_run.sh [test_kernels args]
set -u -o pipefail
OUT=${OUT:-/tmp/sextant-gpu-out}
BUILD=${BUILD:-build-gpu}
mkdir -p "$OUT"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
. "$(dirname "$0")/device_env.sh"
device_record "$OUT"
nvcc --version 2>&1 | tail -2 >> "$OUT/gpu.txt"
cat "$OUT/gpu.txt" "$OUT/date.txt"
if ! make -f kernels/gpu.mk NVCC=nvcc BUILD="$BUILD" -j"$(nproc)" PTXAS_V=1 > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "attention_run: build failed"
    exit 1
fi
grep -iE "warning" "$OUT/build.log" | head
rc=0
timeout 60 "$BUILD/gpu/test_reference" > "$OUT/ref.log" 2>&1 || rc=1
tail -1 "$OUT/ref.log"
timeout 120 "$BUILD/gpu/test_kernels" --attention "$@" 2>&1 | tee "$OUT/test_attention.log" || rc=1
{
    for tool in memcheck racecheck; do
        echo "=== compute-sanitizer --tool $tool test_kernels --quick --attention"
        timeout 60 "$SAN" --tool "$tool" --error-exitcode 9 "$BUILD/gpu/test_kernels" --quick --attention 2>&1 | tail -8
        echo "=== $tool rc=${PIPESTATUS[0]}"
    done
} > "$OUT/sanitizer_attention.log" 2>&1
grep -E "^=== |ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer_attention.log"
timeout 120 "$BUILD/gpu/bench_kernels" --attention 2>&1 | tee "$OUT/bench_attention.log" || rc=1
exit $rc
