#!/usr/bin/env bash
# One device call on 2 GPUs: where the overlapped collectives of ZeRO-3 (and CP 2, EP 2) run against the
# compute beside them, call by call (SEXTANT_TIMELINE: every event pair of the profiling step, per rank),
# and a GEMM of the same shapes beside a collective in isolation (calibrate --comm at those shapes).
# Carried from the build machine: build/sextant, build/sextant-gpu, .deps/lib.
#   OUT=DIR bash scripts/run_timeline.sh          (PHASE=steps or overlap for half of it)
# Leaves $OUT/timeline.tar (logs, per-op CSVs, timelines), $OUT/summary.txt, $OUT/overlap.tar.
set -u
. "$(dirname "$0")/device_env.sh"
PHASE=${PHASE:-all}
B=./build/sextant
device_start timeline

if [ "$PHASE" = all ] || [ "$PHASE" = steps ]; then
  L3="llama3.2-3b --gpu $GPU --seq 2048 --mbs 1 --gbs 16 --steps 8 --warmup 3 --dp 2 --timeout 60"
  L1="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 10 --warmup 3 --dp 2 --timeout 60"
  C2="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 12 --warmup 3 --attention flash --cp 2"
  E2="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 20 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3 --dp 2 --ep 2"
  for spec in "llama3b_z3:$L3 --zero 3" "llama3b_z1:$L3 --zero 1" "llama3b_z2:$L3 --zero 2" "llama1b_z3:$L1 --zero 3" \
              "gpt2_cp2:$C2" "moe_ep2:$E2"; do
    name=${spec%%:*}; args=${spec#*:}
    SEXTANT_TIMELINE="$R/tl_$name" run "t_$name" 150 $B validate $args --calibration "$CAL" --csv "$R/t_$name.csv"
    grep -E "^step time|^memory:|^predicted step" "$R/t_$name.log" | cut -c1-200 | sed "s/^/  $name: /" >> "$S"
  done
fi

if [ "$PHASE" = all ] || [ "$PHASE" = overlap ]; then
  # LLaMA 3.2 3B's GEMMs at mbs 1 x 2048 tokens (qkv, attn_out, mlp_up with the gate, mlp_down) beside
  # collectives about a layer's gather (201 MB) and smaller
  OV="$R/overlap"
  mkdir -p "$OV"
  run overlap 300 ./build/sextant-gpu calibrate --comm --gpus 2 --max-bytes 256M \
    --overlap-shapes 2048x5120x3072,2048x3072x3072,2048x16384x3072,2048x3072x8192 \
    --overlap-bytes 16M,64M,256M --overlap-csv "$OV/overlap.csv" --out "$OV/overlap-overlay.csv"
  sed -n '/# overlap:/,$p' "$R/overlap.log" >> "$S"
fi
keep
