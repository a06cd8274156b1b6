#!/usr/bin/env bash
# The day's last device call on one H100: what `make gpu-test` runs on one GPU on the final
# binaries (test_kernels in full, check-gradients, tests/gpu/calibrate_check.sh; the parallel
# equivalence skips below 2 GPUs), then the learning rate of the LLaMA-style 1.24B (fused
# attention, micro-batch 4), every step's loss: --lr 3e-4 and 1e-4, --lr-warmup 10 and 30.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/gputest; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 330 build/gpu/test_kernels > "$R/test_kernels.log" 2>&1; step test_kernels $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 150 bash tests/gpu/calibrate_check.sh build > "$R/calibrate_check.log" 2>&1; step calibrate_check $?
for spec in "3e-4 10" "1e-4 10" "3e-4 30" "1e-4 30"; do
  set -- $spec
  timeout 60 build/sextant-gpu train llama3.2-1b --gpu h100-sxm --mbs 4 --seq 2048 --steps 50 --attention flash \
    --lr $1 --lr-warmup $2 --every-step --losses "$R/llama_lr$1_warmup$2.txt" > "$R/llama_lr$1_warmup$2.log" 2>&1
  step "llama lr $1 warmup $2: $(grep -E '^loss ' "$R/llama_lr$1_warmup$2.log")" $?
done
tail -2 "$R/test_kernels.log"; tail -3 "$R/check_gradients.log"; tail -4 "$R/calibrate_check.log"
paste "$R"/llama_lr*.txt | awk 'NR % 5 == 0 || NR < 4'
ls "$R"/llama_lr*.txt
tar -C "$OUT" -cf "$OUT/gputest.tar" gputest && rm -rf "$R"
