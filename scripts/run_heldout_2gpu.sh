#!/usr/bin/env bash
# Two GPUs on a model no calibration or fit has seen (the Qwen2.5-3B shape of ZOO cut to 12 layers: GQA with
# 2 KV heads, FFN 11008, a 152k vocabulary), priced as a user's validate prices it (no --calibration: the card's
# shipped overlay): one GPU and the issue's two-GPU layouts, ZeRO-1/2/3, TP 2 with and without SP, PP 2 with and
# without interleaving, CP 2, recomputation; then the MoE test model at DP 2 x EP 2 and DP 2 ZeRO-3 (on a single GPU:
# the model at other micro-batches, lengths and the unfused attention, and the MoE model alone).  Run from the
# repository root with build/ carried:
#   OUT=DIR ZOO=docs/validation/2026-11-26-h200x2-heldout-qwen/zoo_heldout.csv bash scripts/run_heldout_2gpu.sh
# MODEL names another row of ZOO (default qwen2.5-3b-12l), STEPS and WARMUP the steps (default 20 and 5), and
# MOE=0 skips the MoE test model's runs (default 1: run them), for a second model in the same call.
# LAYOUTS=moe runs a mixture-of-experts MODEL instead over the layouts a MoE model takes on two GPUs (ZeRO-1/2/3, EP 2
# with and without ZeRO-3, TP 2 + SP, PP 2, CP 2 with and without EP 2, recomputation) at SHAPE (default
# "--seq 4096 --mbs 1 --gbs 8 --attention flash"), and not the MoE test model.  RUNS=REGEX runs only the layouts
# whose name matches; TIMELINE=REGEX writes the profiling step's timeline of those that match (SEXTANT_TIMELINE,
# R/tl_NAME.rankN.csv: every op call's GPU and host times).
set -u
. "$(dirname "$0")/device_env.sh"
device_start heldout-2gpu
P=${TMPDIR:-/tmp}/heldout-root
private_root "$P" "${ZOO:?ZOO names the held-out zoo}" build/sextant-gpu
G=$P/build/sextant-gpu
M=${MODEL:-qwen2.5-3b-12l}
C="--gpu $GPU --steps ${STEPS:-20} --warmup ${WARMUP:-5}"
D="--seq 2048 --mbs 2 --gbs 16 --attention flash"   # each run's shape, unless its flags give one
runs=("1gpu:" "dp2z1:--dp 2 --zero 1" "dp2z2:--dp 2 --zero 2" "dp2z3:--dp 2 --zero 3" "tp2:--tp 2" "tp2sp:--tp 2 --sp"
      "pp2:--pp 2" "pp2vpp2:--pp 2 --vpp 2" "cp2:--cp 2" "dp2z3rc:--dp 2 --zero 3 --recompute full"
      "tp2sprc:--tp 2 --sp --recompute full")
if [ "${LAYOUTS:-dense}" = moe ]; then
  D=${SHAPE:-"--seq 4096 --mbs 1 --gbs 8 --attention flash"}
  runs=("1gpu:" "dp2z1:--dp 2 --zero 1" "dp2z2:--dp 2 --zero 2" "dp2z3:--dp 2 --zero 3" "ep2:--dp 2 --ep 2"
        "ep2z3:--dp 2 --ep 2 --zero 3" "tp2sp:--tp 2 --sp" "pp2:--pp 2" "cp2:--cp 2" "cp2ep2:--cp 2 --ep 2"
        "dp2z3rc:--dp 2 --zero 3 --recompute full")
  MOE=0
fi
# one GPU (a lent single card): the same model at other micro-batches and lengths, and on the unfused attention
if [ "$(nvidia-smi -L | grep -c '^GPU')" -lt 2 ]; then
  runs=("1gpu:" "1gpu_mbs4:--seq 2048 --mbs 4 --gbs 16 --attention flash"
        "1gpu_s4k:--seq 4096 --mbs 1 --gbs 8 --attention flash" "1gpu_unfused:--seq 2048 --mbs 2 --gbs 16 --attention unfused")
fi
for spec in "${runs[@]}"; do
  name=${spec%%:*} flags=${spec#*:}
  [ -n "${RUNS:-}" ] && ! [[ $name =~ $RUNS ]] && continue
  case $flags in *--seq*) ;; *) flags="$D $flags" ;; esac
  if [ -n "${TIMELINE:-}" ] && [[ $name =~ $TIMELINE ]]; then export SEXTANT_TIMELINE=$R/tl_$name; else unset SEXTANT_TIMELINE; fi
  run "$name" 120 $G train $M $C $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory|^power" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
# the MoE test model (in every zoo) over EP 2 and under ZeRO-3 (the two-GPU layouts skip on one GPU); MOE=0 skips it
[ "${MOE:-1}" = 0 ] && { keep; exit 0; }
E="--gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps ${STEPS:-20} --warmup ${WARMUP:-5} --attention flash"
for spec in "moe_1gpu:" "moe_ep2:--dp 2 --ep 2" "moe_dp2z3:--dp 2 --zero 3"; do
  name=${spec%%:*} flags=${spec#*:}
  run "$name" 120 $G train moe-test $E $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
keep
