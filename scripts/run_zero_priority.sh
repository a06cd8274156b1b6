#!/usr/bin/env bash
# ZeRO's collectives on a stream of the device's highest priority (SEXTANT_COMM_STREAM_PRIORITY=1) against the
# default, on two GPUs: LLaMA-3.2 1B (the shape of tests/data/2026-11-27-h200x2-zero-overhead/rerun), the Yi-6B
# shape cut to 6 layers and OLMoE cut to 4 (docs/validation/2026-11-27-h200x2-zero-overhead).  Each priced as a
# user's validate prices it.  From the repository root, build/ carried:
#   OUT=DIR bash scripts/run_zero_priority.sh      -> $OUT/summary.txt, $OUT/zero-priority.tar
set -u
. "$(dirname "$0")/device_env.sh"
device_start zero-priority
P=${TMPDIR:-/tmp}/zero-priority-root
rm -f "$P.zoo"; cp models/zoo.csv "$P.zoo"
for z in docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv; do
  tail -n +2 "$z" | grep -E '^(yi-6b-6l|olmoe-4l),' >> "$P.zoo"
done
private_root "$P" "$P.zoo" build/sextant-gpu
G=$P/build/sextant-gpu
L="llama3.2-1b --seq 2048 --mbs 2 --gbs 16 --attention unfused --gpu $GPU --steps 20 --warmup 5"
Y="yi-6b-6l --seq 2048 --mbs 2 --gbs 16 --attention flash --gpu $GPU --steps 20 --warmup 5"
O="olmoe-4l --seq 4096 --mbs 1 --gbs 8 --attention flash --gpu $GPU --steps 30 --warmup 5"
for spec in "llama_z1:$L --dp 2 --zero 1" "llama_z3:$L --dp 2 --zero 3" "llama_z3_prio:PRIO $L --dp 2 --zero 3" \
            "llama_z1_prio:PRIO $L --dp 2 --zero 1" "yi_z3:$Y --dp 2 --zero 3" "yi_z3_prio:PRIO $Y --dp 2 --zero 3" \
            "olmoe_z3:$O --dp 2 --zero 3" "olmoe_z3_prio:PRIO $O --dp 2 --zero 3"; do
  name=${spec%%:*} flags=${spec#*:} prio=0
  case $flags in PRIO*) prio=1; flags=${flags#PRIO } ;; esac
  run "$name" 150 env SEXTANT_COMM_STREAM_PRIORITY=$prio $G train $flags --csv "$R/$name.csv"
  grep -E "^step time|^power:|^host:" "$R/$name.log" | cut -c1-150 | sed "s/^/  $name: /" >> "$S"
done
keep
