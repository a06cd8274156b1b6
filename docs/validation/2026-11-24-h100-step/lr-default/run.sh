#!/usr/bin/env bash
# One device call on one H100: which peak learning rate should `train` and `validate` default to?
# Each model of the validation set at its largest validated micro-batch, 100 steps from random
# initialisation on the synthetic tokens, --lr-warmup 10, every step's loss.  The data's floor
# (make_batch in validator/train.c: 9 of 10 next tokens follow a rule, 1 in 10 uniform over V) is
# 0.9 ln(1/0.9) + 0.1 ln(10 V): 1.41 for GPT-2's V = 50257, 1.50 for V = 128256; a model that
# learned only which tokens occur sits near their unigram entropy, about 8.9.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/lr; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
run() { # name model mbs seq attention lr
  timeout 90 build/sextant-gpu train "$2" --gpu h100-sxm --mbs "$3" --seq "$4" --steps 100 --attention "$5" \
    --lr "$6" --lr-warmup 10 --every-step --losses "$R/$1_lr$6.txt" > "$R/$1_lr$6.log" 2>&1
  local rc=$?
  echo "$1 lr $6: rc=$rc at $(( $(date +%s) - t0 )) s: $(grep -E '^loss ' "$R/$1_lr$6.log")" | tee -a "$R/summary.txt"
}
for lr in 1e-4 3e-4 6e-4; do run gpt2_mbs32 gpt2 32 1024 unfused $lr; done
for lr in 1e-4 3e-4; do run gpt2-medium_mbs16 gpt2-medium 16 1024 unfused $lr; done
for lr in 1e-4 2e-4; do run llama3.2-1b_mbs4 llama3.2-1b 4 2048 flash $lr; done
for f in "$R"/*_lr*.txt; do
  echo "$(basename "$f" .txt): $(awk '$1 % 10 == 0 || $1 == 1 { printf "%d:%.2f ", $1, $2 }' "$f")"
done
tar -C "$OUT" -cf "$OUT/lr.tar" lr && rm -rf "$R"
