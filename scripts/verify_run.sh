#!/usr/bin/env bash
# One device call on 2 GPUs: everything `make gpu-test` runs (kernel tests,
# float64 gradient check, parallel equivalence), with binaries built on the
# development machine and carried with .deps/lib, plus the norm backward's
# bandwidth rows and two timed pipeline layouts.  Logs in $OUT/verify.tar.
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-h200}
R=$OUT/verify; mkdir -p "$R"
device_record "$R"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
# SKIP_KERNELS=1: only the training paths (gradient check, equivalence, timed layouts)
if [ -z "${SKIP_KERNELS:-}" ]; then
  timeout 330 build/gpu/test_kernels > "$R/test_kernels.log" 2>&1; step test_kernels $?
fi
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 300 bash tests/gpu/parallel_equivalence.sh build/sextant-gpu $GPU > "$R/equivalence.log" 2>&1; step equivalence $?
[ -n "${SKIP_KERNELS:-}" ] || { timeout 60 build/gpu/bench_kernels ${BENCH_FLAGS:---norm} > "$R/bench_norm.log" 2>&1; step bench_norm $?; }
C="--calibration docs/validation/2026-11-23-h200x2-train/h200-x2.csv"
for spec in "gpt2m_pp2:gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 15 --gbs 64 --pp 2" \
            "llama_pp2:llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --steps 15 --gbs 16 --pp 2" \
            "gpt2m_pp2vpp2_m2:gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 15 --gbs 16 --pp 2 --vpp 2"; do
  name=${spec%%:*}; args=${spec#*:}
  timeout 120 build/sextant-gpu train $args $C --csv "$R/t_$name.csv" > "$R/t_$name.log" 2>&1; step "t_$name" $?
done
tar -C "$OUT" -cf "$OUT/verify.tar" verify && rm -rf "$R"
