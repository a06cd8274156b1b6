#!/bin/bash
# What a GPU draws while NCCL collectives run (dev/cuda/collective_power.cu), and the clock the power model
# predicts against the one measured for steps whose TP communication is exposed (validate on 2 GPUs, TP 2 with
# SP, beside the same model at DP 2).  From the repository root on a 2-GPU machine, with build/sextant,
# build/sextant-gpu, build/dev/collective_power and .deps carried; writes under $OUT:
#   OUT=DIR bash scripts/run_collective_power.sh
# (docs/validation/2026-11-26-h100x2-collective-power/README.md)
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-h100-sxm}
CAL=${CAL:-hwdb/measured/h100-sxm.csv}
device_begin collective-power
cp "$R/gpu.txt" "$R/date.txt" "$OUT/"
run collective_power 200 ./build/dev/collective_power 4
grep -E "^[a-z_0-9]+,|check|NCCL" "$R/collective_power.log" >> "$S"
for spec in "l3b_tp2:llama3.2-3b --seq 4096 --mbs 1 --gbs 8 --tp 2 --sp" \
            "l3b_dp2:llama3.2-3b --seq 4096 --mbs 1 --gbs 8 --dp 2" \
            "gxl_tp2:gpt2-xl --seq 1024 --mbs 4 --gbs 16 --tp 2 --sp" \
            "gxl_dp2:gpt2-xl --seq 1024 --mbs 4 --gbs 16 --dp 2"; do
  name=${spec%%:*}; args=${spec#*:}
  run "$name" 240 ./build/sextant validate $args --gpu "$GPU" --gpus 2 --steps 16 --calibration "$CAL" \
      --csv "$R/$name.csv" --json "$R/$name.json"
  grep -E "^power|^step time|^# sextant-gpu train" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
cat "$S"
