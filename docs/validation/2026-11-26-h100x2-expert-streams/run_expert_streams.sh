#!/usr/bin/env bash
# The experts' GEMMs of one loop over MOE_STREAMS streams (validator/moe.c experts_fork) against one stream
# (the binary before), on the 2 GPUs that came
# (docs/validation/2026-11-26-h100x2-expert-streams):
#   - one GPU's losses from both binaries (the same GEMMs on other streams: the same bits expected), EP 2's against
#     one GPU's;
#   - the timed MoE runs (one GPU, EP 2 at mbs 4 and 8), old and new binaries alternated, priced with the card's
#     shipped overlay.
# Run from the repository root with the new build/ and the old sextant-gpu in .carry/old/:
#   OUT=DIR bash scripts/run_expert_streams.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_begin expert-streams
GPU=$(card_row)
CAL=hwdb/measured/$GPU.csv
OLD=.carry/old/sextant-gpu
NEW=./build/sextant-gpu
say "cards: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' '); overlay $CAL"
device_sample "$R/smi.csv"
E="moe-test --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --lr 1e-3 --lr-warmup 3"
run eq_one 120 $NEW train $E --losses "$R/loss_one.txt"
run eq_ep2 120 $NEW train $E --dp 2 --ep 2 --losses "$R/loss_ep2.txt"
run eq_old_one 120 $OLD train $E --losses "$R/loss_old_one.txt"
say "  $(compare "$R/loss_one.txt" "$R/loss_ep2.txt")  EP 2 (new) against one GPU (new)"
if cmp -s "$R/loss_one.txt" "$R/loss_old_one.txt"; then say "  one GPU losses old = new (bitwise)"; else say "  one GPU losses old != new"; fi
T="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3 --calibration $CAL"
T8=${T/--mbs 4 --gbs 16/--mbs 8 --gbs 32}
for round in 1 2; do
  for b in old new; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    run t${round}_${b}_one 150 $bin train $T --csv "$R/t${round}_${b}_one.csv"
    run t${round}_${b}_ep2 150 $bin train $T --dp 2 --ep 2 --csv "$R/t${round}_${b}_ep2.csv"
    grep -hE "^step time" "$R/t${round}_${b}_one.log" "$R/t${round}_${b}_ep2.log" | sed "s/^/  t${round} $b one, ep2: /" >> "$S"
  done
done
for b in old new; do
  bin=$NEW; [ $b = old ] && bin=$OLD
  run t_${b}_ep2_mbs8 150 $bin train $T8 --dp 2 --ep 2 --csv "$R/t_${b}_ep2_mbs8.csv"
  grep -E "^step time" "$R/t_${b}_ep2_mbs8.log" | sed "s/^/  $b ep2 mbs 8: /" >> "$S"
done
grep -h "MoE buffers" "$R"/t1_*.log | sed 's/.*expert GEMMs/  expert GEMMs/' >> "$S"
kill $SMI_PID 2>/dev/null; keep; cat "$S"
