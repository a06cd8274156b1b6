#!/usr/bin/env bash
# ZeRO over the MoE layers (validator/moe.c, moe_plan.h's shards) and MoE with interleaving: make gpu-test's MoE
# layouts against one GPU (tests/gpu/parallel_equivalence.sh, ONLY='^moe-test '; with four GPUs its four-GPU ones
# too), then timed steps of the MoE test model at seq 1024, micro-batch 4, each priced as run with the card's shipped
# overlay: DP 2 at ZeRO 0-3 (EP 1: the experts' state, gradients and parameters over the two ranks), DP 2 x EP 2 at
# ZeRO 3 (the experts whole, the routers sharded), PP 2 with two chunks a stage; with four GPUs DP 4 x EP 2 at ZeRO
# 1 and 3 (the experts over a group of two).  OLD (optional): the binary before the change, run at DP 2 ZeRO-1,
# whose MoE state was whole on every rank (the memory the planner sharded).
# Run from the repository root with build/ carried:
#   OUT=DIR bash scripts/run_moe_zero.sh
#   OUT=DIR OLD=.carry/old/sextant-gpu PART=timed bash scripts/run_moe_zero.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start moe-zero
gpus=$(nvidia-smi -L | grep -c "^GPU")
G=build/sextant-gpu
if [ "${PART:-all}" != timed ]; then
  ONLY='^moe-test ' timeout 420 bash tests/gpu/parallel_equivalence.sh $G $GPU > "$R/equivalence.txt" 2>&1
  say "equivalence rc=$?: $(grep -c ^PASS "$R/equivalence.txt") PASS, $(grep -c ^FAIL "$R/equivalence.txt") FAIL"
  grep -E "^(PASS|FAIL)" "$R/equivalence.txt" >> "$S"
  keep
fi
[ "${PART:-all}" = equivalence ] && exit 0
device_sample "$R/smi.csv"
C="--gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --calibration $CAL"
runs=("dp2_z0:--dp 2" "dp2_z1:--dp 2 --zero 1" "dp2_z2:--dp 2 --zero 2" "dp2_z3:--dp 2 --zero 3"
      "ep2_z3:--dp 2 --ep 2 --zero 3" "pp2_vpp2:--pp 2 --vpp 2")
[ "$gpus" -ge 4 ] && runs+=("dp4_ep2_z1:--dp 4 --ep 2 --zero 1" "dp4_ep2_z3:--dp 4 --ep 2 --zero 3" "dp4_z1:--dp 4 --zero 1")
for spec in "${runs[@]}"; do
  name=${spec%%:*}; flags=${spec#*:}
  run "$name" 150 $G train moe-test $C $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory|^ZeRO|^NCCL|^our alloc|^MoE buffers" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
if [ -n "${OLD:-}" ]; then
  run old_dp2_z1 150 "$OLD" train moe-test $C --dp 2 --zero 1 --csv "$R/old_dp2_z1.csv"
  grep -E "^step time|^memory|^our alloc" "$R/old_dp2_z1.log" | sed "s/^/  old_dp2_z1: /" >> "$S"
fi
kill $SMI_PID 2>/dev/null; keep; cat "$S"
