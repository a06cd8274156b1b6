#!/usr/bin/env bash
# Device call on one H100: the clock probe's and the cross-entropy's kernel tests, the kernel
# bandwidth table (with the 128k-vocabulary cross-entropy rows), then the one-GPU validation
# runs of validator/run_h100.sh: PART=1 (calibrate with clock scaling, unfused runs) or
# PART=all (both attentions; with UNSCALED=1 also a calibrate --no-clock-scaling for the
# comparison).  Results in $OUT/*.tar.  Written for commit c1252a8, where clock scaling was
# calibrate's default and --no-clock-scaling turned it off; since then the default is the times
# as measured and --clock-scaling turns scaling on.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
K=$OUT/kernels; mkdir -p "$K"
t0=$(date +%s)
timeout 30 build/gpu/test_kernels --clock > "$K/test_clock.log" 2>&1; echo "test_clock rc=$? at $(( $(date +%s) - t0 )) s"
timeout 150 build/gpu/test_kernels --quick --no-attention > "$K/test_kernels_quick.log" 2>&1; echo "test_kernels_quick rc=$? at $(( $(date +%s) - t0 )) s"
timeout 120 build/gpu/bench_kernels > "$K/bench_kernels.log" 2>&1; echo "bench rc=$? at $(( $(date +%s) - t0 )) s"
if [ -n "${UNSCALED:-}" ]; then
  timeout 150 build/sextant-gpu calibrate --gpu ${GPU:-h100-sxm} --no-clock-scaling --out "$K/${GPU:-h100-sxm}-unscaled.csv" > "$K/calibrate-unscaled.log" 2>&1
  echo "calibrate --no-clock-scaling rc=$? at $(( $(date +%s) - t0 )) s"
fi
tail -2 "$K"/test_*.log 2>/dev/null; grep -E "cross_entropy" "$K/bench_kernels.log" 2>/dev/null
tar -C "$OUT" -cf "$OUT/kernels.tar" kernels && rm -rf "$K"
bash validator/run_h100.sh
echo "all done at $(( $(date +%s) - t0 )) s"
