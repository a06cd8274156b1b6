#!/usr/bin/env bash
# One device call on one H100 (2026-11-24): the cross-entropy with clusters as the default for
# long rows (kernel tests, sanitizers, bandwidth table), the learning-rate warm-up against the
# GPT-2 mbs 32 loss spike (--lr-warmup 0, 10, 20; every step's loss), then the 18 one-GPU
# validation runs of validator/run_h100.sh (PART=all: one calibrate, unfused and fused
# attention, calibrated and on hwdb defaults).  Binaries built on the development machine and
# carried with .deps/lib.  Results in $OUT/kernels.tar, $OUT/lr.tar and $OUT/results.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
t0=$(date +%s)
K=$OUT/kernels; mkdir -p "$K"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$K/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$K/date.txt"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 90 build/gpu/test_kernels --ce > "$K/test_ce.log" 2>&1; echo "test_ce rc=$? at $(( $(date +%s) - t0 )) s"
timeout 60 "$SAN" --tool memcheck --error-exitcode 9 build/gpu/test_kernels --ce --quick > "$K/memcheck_ce.log" 2>&1
echo "memcheck rc=$? at $(( $(date +%s) - t0 )) s"
timeout 60 build/gpu/bench_kernels > "$K/bench_kernels.log" 2>&1; echo "bench rc=$? at $(( $(date +%s) - t0 )) s"
tail -2 "$K/test_ce.log"; tail -1 "$K/memcheck_ce.log"; grep -E "cross_entropy|mean %copy" "$K/bench_kernels.log"
tar -C "$OUT" -cf "$OUT/kernels.tar" kernels && rm -rf "$K"
L=$OUT/lr; mkdir -p "$L"
for w in 0 10 20; do
  timeout 60 build/sextant-gpu train gpt2 --gpu h100-sxm --mbs 32 --seq 1024 --steps 50 --lr-warmup $w --every-step \
    --losses "$L/gpt2_mbs32_warmup$w.txt" > "$L/gpt2_mbs32_warmup$w.log" 2>&1
  echo "lr-warmup $w rc=$? at $(( $(date +%s) - t0 )) s: $(grep -E '^loss ' "$L/gpt2_mbs32_warmup$w.log")"
done
paste "$L"/gpt2_mbs32_warmup0.txt "$L"/gpt2_mbs32_warmup10.txt "$L"/gpt2_mbs32_warmup20.txt | awk 'NR % 5 == 0 || NR < 4'
tar -C "$OUT" -cf "$OUT/lr.tar" lr && rm -rf "$L"
PART=all bash validator/run_h100.sh
echo "all done at $(( $(date +%s) - t0 )) s"
