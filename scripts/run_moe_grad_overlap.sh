#!/usr/bin/env bash
# The MoE layers' gradient reductions issued beside the backward, a layer at a time (validator/moe.c
# moe_grads_ready), against all of them after the backward (the binary in .carry/old/), on the 2 GPUs that came
# (docs/validation/2026-11-26-h100x2-moe-grad-overlap):
#   - DP 2 and EP 2 losses from both binaries (the same sums in another order of launches: the same bits expected),
#     and one GPU's beside them;
#   - the timed DP 2 steps (the experts reduced over both ranks), old and new alternated twice, EP 2 and one GPU
#     once each, priced with the card's shipped overlay.
# Run from the repository root with both binaries unpacked:  OUT=DIR bash scripts/run_moe_grad_overlap.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start moe-grad-overlap
OLD=.carry/old/sextant-gpu
NEW=./build/sextant-gpu
device_sample "$R/smi.csv"
E="moe-test --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --lr 1e-3 --lr-warmup 3"
run eq_one 120 $NEW train $E --losses "$R/loss_one.txt"
for lay in dp2 ep2; do
  flags="--dp 2"; [ $lay = ep2 ] && flags="--dp 2 --ep 2"
  for b in old new; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    run eq_${b}_$lay 120 $bin train $E $flags --losses "$R/loss_${b}_$lay.txt"
  done
  if cmp -s "$R/loss_old_$lay.txt" "$R/loss_new_$lay.txt"; then say "  $lay losses old = new (bitwise)"; else say "  $lay losses old != new"; fi
  say "  $(compare "$R/loss_one.txt" "$R/loss_new_$lay.txt")  $lay (new) against one GPU"
done
T="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --calibration $CAL"
for round in 1 2; do
  for b in old new; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    run t${round}_${b}_dp2 150 $bin train $T --dp 2 --csv "$R/t${round}_${b}_dp2.csv"
    grep -E "^step time" "$R/t${round}_${b}_dp2.log" | sed "s/^/  t${round} $b dp2: /" >> "$S"
    grep -E "^(dp_allreduce_grads|edp_allreduce_grads|dp_exposed|optimizer) " "$R/t${round}_${b}_dp2.log" | sed 's/^/    /' >> "$S"
  done
done
run t_new_ep2 150 $NEW train $T --dp 2 --ep 2 --csv "$R/t_new_ep2.csv"
run t_new_one 150 $NEW train $T --csv "$R/t_new_one.csv"
grep -hE "^step time" "$R/t_new_ep2.log" "$R/t_new_one.log" | sed "s/^/  new ep2, one: /" >> "$S"
kill $SMI_PID 2>/dev/null; keep; cat "$S"
