#!/usr/bin/env bash
# One device call on one H100: is the step's fused attention slower than calibrate's because of
# where its operands live (the step's one allocation) or because of the step around it?
# SEXTANT_REPLAY=10 SEXTANT_REPLAY_COPIES=1: in one more step every attention runs 10 more times
# on its own operands, then 10 more on copies of them in an allocation of their own; then the
# same copies back to back alone after a second of idle, as calibrate times them.  Fused LLaMA mbs 4 and GPT-2 mbs 32,
# 30 steps, against the overlay of ../h100-heated-attention-2026-11-25/warm400 (calibrate alone).
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/copies; mkdir -p "$R"
G=./build/sextant-gpu
CAL=docs/validation/h100-heated-attention-2026-11-25/warm400/run/h100-sxm-alone.csv
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
for spec in "llama3.2-1b 4 2048" "gpt2 32 1024"; do
  set -- $spec
  n="flash_${1}_mbs$2"
  SEXTANT_REPLAY=10 SEXTANT_REPLAY_COPIES=1 timeout 120 $G train "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 30 \
    --attention flash --calibration "$CAL" --csv "$R/$n.csv" > "$R/$n.log" 2>&1
  echo "$n rc=$? at $(( $(date +%s) - t0 )) s"
  grep -E "step time|^SEXTANT_REPLAY_COPIES" "$R/$n.log"; sed -n "/^Replayed/,\$p" "$R/$n.log" | grep -E "^op|attention"
done
cd "$OUT" && tar cf copies.tar copies && rm -rf copies
