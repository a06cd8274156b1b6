#!/usr/bin/env bash
# NCCL's device memory by part (docs/model.md, "Other memory"): calibrate --comm over 2 GPUs (and 4 where present)
# measures the world communicator's creation and first small all-reduce, a split, its collectives' buffers, its
# send/recv buffers beside them, and a send/recv-only communicator's; those five keys are added to a copy of the
# card's shipped overlay (comm2/overlay.csv) and the trainer, which now opens no communicator for a group of one rank,
# runs dense and MoE layouts on 2 (and 4) GPUs priced with it: each log's "NCCL (rank 0):" line gives every
# communicator's split and first use beside the predicted and measured peak.
# COMMS: the calibrate --comm rank counts (default "2 4"); NAMES: the runs to make (default: all); STEPS, WARMUP: the
# runs' steps (default 12 and 3: the memory; the MoE steps need more for their times).  Run from the repository root
# with build/ carried:
#   OUT=DIR bash scripts/run_nccl_memory.sh
#   OUT=DIR COMMS=2 NAMES="moe_ep2 moe_dp4_ep2 gpt2_pp2" STEPS=25 WARMUP=5 bash scripts/run_nccl_memory.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start nccl-memory
gpus=$(nvidia-smi -L | grep -c "^GPU")
G=build/sextant-gpu
KEYS='nccl_(process|split|collective|p2p_buffers|p2p_first)_memory_gib'
for n in ${COMMS:-2 4}; do
  [ "$gpus" -ge $n ] || continue
  mkdir -p "$R/comm$n"
  run comm$n 240 $G calibrate --comm --gpus $n --no-overlap --max-bytes 256M --repeats 5 --out "$R/comm$n/comm.csv"
  grep "NCCL's device memory" "$R/comm$n.log" | sed "s/^/  comm$n: /" >> "$S"
done
# the shipped overlay and the two-rank parts: what the planner prices the runs with
# (an overlay gives each key once: the shipped parts, where it has them, give way to those measured here)
grep -vE ",$KEYS," "$CAL" > "$R/overlay.csv"
grep -E ",$KEYS," "$R/comm2/comm.csv" >> "$R/overlay.csv"
C="--gpu $GPU --seq 1024 --steps ${STEPS:-12} --warmup ${WARMUP:-3} --calibration $R/overlay.csv"
runs=("gpt2_dp2:gpt2:--mbs 4 --gbs 16 --dp 2" "gpt2_pp2:gpt2:--mbs 4 --gbs 16 --pp 2"
      "llama_tp2:llama3.2-1b:--mbs 4 --gbs 16 --tp 2 --sp" "llama_pp2:llama3.2-1b:--mbs 4 --gbs 16 --pp 2"
      "llama_z3:llama3.2-1b:--mbs 4 --gbs 16 --dp 2 --zero 3" "llama_cp2:llama3.2-1b:--mbs 2 --gbs 8 --cp 2 --attention flash"
      "moe_dp2_z1:moe-test:--mbs 4 --gbs 16 --dp 2 --zero 1 --attention flash"
      "moe_ep2:moe-test:--mbs 4 --gbs 16 --dp 2 --ep 2 --attention flash"
      "moe_vpp:moe-test:--mbs 4 --gbs 16 --pp 2 --vpp 2 --attention flash")
[ "$gpus" -ge 4 ] && runs+=("llama_tp2dp2:llama3.2-1b:--mbs 4 --gbs 16 --tp 2 --sp --dp 2"
                           "llama_tp2pp2:llama3.2-1b:--mbs 4 --gbs 16 --tp 2 --pp 2"
                           "llama_dp4:llama3.2-1b:--mbs 4 --gbs 16 --dp 4 --zero 1"
                           "moe_dp4_ep2:moe-test:--mbs 4 --gbs 16 --dp 4 --ep 2 --zero 1 --attention flash")
for spec in "${runs[@]}"; do
  IFS=: read -r name model flags <<< "$spec"
  [ -n "${NAMES:-}" ] && case " $NAMES " in *" $name "*) ;; *) continue;; esac
  run "$name" 150 $G train $model $C $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory|^NCCL" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
keep; cat "$S"
