#!/bin/bash
# One device call for branch rope: the kernel tests (RoPE included), the RoPE bandwidth rows,
# sextant-gpu calibrate (with the fused attention), the RoPE tests under compute-sanitizer, and the
# LLaMA 3.2 1B op list timed against the new overlay.  Logs and the overlay go to $OUT.
# As run on 2026-11-23 (docs/validation/archive/2026-11-23-h200-rope, docs/validation/archive/2026-11-23-h200-calibrate):
# built here with `make`, then this script, build/gpu/{test_kernels,bench_kernels}, build/sextant-gpu,
# hwdb/, models/, lib/libcudart.so.13 and the kernel sources (src/, a fallback build) were copied into
# one folder carried to the GPU machine, and the script was run from there (it cds to its own folder).
set -u
W=$(cd "$(dirname "$0")" && pwd)
cd "$W"
. "$W/device_env.sh"   # carry scripts/device_env.sh beside this script
export LD_LIBRARY_PATH="$W/../.deps/lib:/usr/local/cuda/lib64:$W/lib:${LD_LIBRARY_PATH:-}"
O=${OUT:-/tmp/out}; mkdir -p "$O"
device_record "$O"; uname -r >> "$O/gpu.txt"
cat "$O/gpu.txt"
TK=build/gpu/test_kernels; BK=build/gpu/bench_kernels
$TK --help >/dev/null 2>&1; if [ $? -eq 127 ]; then
  echo "prebuilt binaries do not load: building the kernels here"
  (cd src && make -s -f kernels/gpu.mk NVCC=nvcc BUILD=build -j16) > "$O/build.log" 2>&1
  TK=src/build/gpu/test_kernels; BK=src/build/gpu/bench_kernels
fi
timeout 80 $TK > "$O/test.log" 2>&1; echo "test_kernels rc=$?"
grep -E "^rope|checks|test_kernels|FAIL" "$O/test.log"
timeout 40 $BK --rope > "$O/bench_rope.log" 2>&1; echo "bench rc=$?"
cat "$O/bench_rope.log"
timeout 60 build/sextant-gpu calibrate --gpu h200 --out "$O/h200-calibration.csv" > "$O/calibrate.log" 2>&1; echo "calibrate rc=$?"
tail -12 "$O/calibrate.log"; cat "$O/h200-calibration.csv"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  echo "=== compute-sanitizer --tool $tool test_kernels --quick --rope"
  timeout 30 "$SAN" --tool $tool --error-exitcode 9 $TK --quick --rope 2>&1 | tail -8
  echo "=== $tool rc=${PIPESTATUS[0]}"
done > "$O/sanitizer.log" 2>&1
grep -E "^===|SUMMARY" "$O/sanitizer.log"
timeout 50 build/sextant-gpu ops llama3.2-1b --gpu h200 --mbs 4 --seq 2048 --calibration "$O/h200-calibration.csv" > "$O/ops_llama1b.log" 2>&1; echo "ops rc=$?"
grep -E "^#|rope|attention|step|tokens" "$O/ops_llama1b.log"
