#!/usr/bin/env bash
# Context parallelism in the training step (issue 24, item 3: CP = 2), on a lent 2 x H100:
#   kernels  test_kernels --attention: the fused attention and the ring's blocks, merge, dK/dV
#            return and RoPE at the chunks' positions against float64 (one GPU);
#   equiv    every step's loss of --cp 2 (and --cp 2 --recompute full) against one GPU with the
#            same fused attention, gpt2 and llama3.2-1b, parallel_equivalence.sh's tolerance
#            (1% at any step, 0.5% at the last);
#   timed    `sextant validate` gpt2 (seq 1024) and llama3.2-1b (seq 4096) with --cp 2 against the
#            planner's op list (its cp_ring_kv rows), calibrated with hwdb/measured/h100-sxm.csv,
#            and the same runs on one GPU (throughput per GPU beside CP's);
#   plan     `sextant estimate ... --cp 2 --format json` validated with `validate --plan`.
# Carried in DIR (this script's folder) with .deps/lib: bin/ (sextant, sextant-gpu, test_kernels
# built on the development machine) and this branch's hwdb/ and models/ (the binaries read
# bin/../hwdb: a newer tree's keys would not load in them).
# PHASE=kernels | equiv | timed | plan | all (default all).  Results: $OUT/cp.tar and $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_env.sh"   # the library path, NVLink multicast off, say, run, keep, compare
DIR=$(cd "$(dirname "$0")" && pwd)
GPU=${GPU:-h100-sxm}
PHASE=${PHASE:-all}
CAL=${CAL:-$DIR/hwdb/measured/h100-sxm.csv}
device_begin cp
G=$DIR/bin/sextant-gpu
B=$DIR/bin/sextant
has() { [ "$PHASE" = all ] || [[ ",$PHASE," == *",$1,"* ]]; }
cat "$R/gpu.txt" >> "$S"

if has kernels; then
  run kernels 120 "$DIR/bin/test_kernels" --attention
  grep -E "cp_ring|rope_fwd_chunks|flash_attn|checks|test_kernels" "$R/kernels.log" | sed 's/^/  /' >> "$S"
fi

if has equiv; then
  for model in gpt2 llama3.2-1b; do
    equiv "$model" "$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step --attention flash --timeout 60" \
      "cp2:--cp 2" "cp2rc:--cp 2 --recompute full"
  done
fi

if has timed; then
  M="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 12 --attention flash"
  L="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
  L8="llama3.2-1b --gpu $GPU --seq 8192 --mbs 1 --gbs 4 --steps 12 --attention flash"
  for spec in "gpt2_cp2:$M --cp 2" "gpt2_1gpu:$M" "llama_cp2:$L --cp 2" "llama_1gpu:$L" "llama8k_cp2:$L8 --cp 2" \
              "llama8k_1gpu:$L8"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t_$name" 150 $B validate $args --timeout 60 --calibration "$CAL" --csv "$R/t_$name.csv" --json "$R/t_$name.json"
    grep -E "^step time|^tokens/s|^memory:|^predicted step|^loss" "$R/t_$name.log" | cut -c1-240 | sed "s/^/  $name: /" >> "$S"
    grep -E "^attention|^cp_|^dp_|^rope|^embedding|^step  " "$R/t_$name.log" | sed "s/^/  $name: /" >> "$S"
  done
fi

if has plan; then
  $B estimate llama3.2-1b --gpu "$GPU" --gpus 2 --cp 2 --mbs 1 --gbs 8 --seq 4096 --attention flash \
    --format json > "$R/plan_llama_cp2.json" 2> "$R/plan_llama_cp2.err"
  run "plan_llama_cp2" 150 $B validate --plan "$R/plan_llama_cp2.json" --gpus 2 --steps 12 --timeout 60 \
    --calibration "$CAL" --csv "$R/plan_llama_cp2.csv"
  grep -E "^# |^step time|^memory:|^attention|^cp_" "$R/plan_llama_cp2.log" | cut -c1-240 | sed "s/^/  plan: /" >> "$S"
fi

keep
cat "$S"
