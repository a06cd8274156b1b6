#!/usr/bin/env bash
# The EP exchange with one message per peer (validator/moe.c, kernels/moe.cu sx_moe_copy_chunks) against the
# message per (peer, expert) chunk it replaced, on the 2 GPUs that came (docs/validation/2026-11-26-h200x2-ep-messages):
#   - the MoE kernels' checks, the chunk copy's among them;
#   - EP 2's losses from both binaries (a copy changes no value: the same bits expected), and one GPU's beside them;
#   - EP 2 with one expert a rank (a two-expert model in the zoo of a private root): the path without a staging buffer,
#     against one GPU;
#   - the timed MoE runs, old and new binaries alternated twice, priced with the card's shipped overlay.
# Run from the repository root with the new build/ and the old sextant-gpu in .carry/old/:
#   OUT=DIR bash scripts/run_ep_messages.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start ep-messages
OLD=.carry/old/sextant-gpu
NEW=./build/sextant-gpu
device_sample "$R/smi.csv"
run test_moe_kernels 120 ./build/gpu/test_moe_kernels
grep -E "chunks|checks" "$R/test_moe_kernels.log" | sed 's/^/  /' >> "$S"
E="moe-test --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --lr 1e-3 --lr-warmup 3"
run eq_one 120 $NEW train $E --losses "$R/loss_one.txt"
for b in old new; do
  bin=$NEW; [ $b = old ] && bin=$OLD
  run eq_${b}_ep2 120 $bin train $E --dp 2 --ep 2 --losses "$R/loss_${b}_ep2.txt"
done
if cmp -s "$R/loss_old_ep2.txt" "$R/loss_new_ep2.txt"; then say "  EP 2 losses old = new (bitwise)"; else say "  EP 2 losses old != new"; fi
say "  $(compare "$R/loss_one.txt" "$R/loss_new_ep2.txt")  EP 2 (new) against one GPU"
# one expert a rank: moe-test's row with 2 experts, top-1, added to the zoo of a private root (private_root)
W=/tmp/ep-root
{ cat models/zoo.csv; sed -n 's/^moe-test,/moe-test-e2,/p' models/zoo.csv |
    awk -F, 'BEGIN{OFS=","} {$18=2; $19=1; $20=147342336; $21=112739328; print}'; } > "$R/zoo_e2.csv"
private_root "$W" "$R/zoo_e2.csv" $NEW
E2=${E/moe-test/moe-test-e2}
run eq_e2_one 120 $W/build/sextant-gpu train $E2 --losses "$R/loss_e2_one.txt"
run eq_e2_ep2 120 $W/build/sextant-gpu train $E2 --dp 2 --ep 2 --losses "$R/loss_e2_ep2.txt"
say "  $(compare "$R/loss_e2_one.txt" "$R/loss_e2_ep2.txt")  EP 2, one expert a rank, against one GPU"
T="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3 --calibration $CAL"
for round in 1 2; do
  for b in old new; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    run t${round}_${b}_ep2 150 $bin train $T --dp 2 --ep 2 --csv "$R/t${round}_${b}_ep2.csv"
    grep -E "^step time" "$R/t${round}_${b}_ep2.log" | sed "s/^/  t${round} $b ep2: /" >> "$S"
  done
done
T8=${T/--mbs 4 --gbs 16/--mbs 8 --gbs 32}
for b in old new; do
  bin=$NEW; [ $b = old ] && bin=$OLD
  run t_${b}_ep2_mbs8 150 $bin train $T8 --dp 2 --ep 2 --csv "$R/t_${b}_ep2_mbs8.csv"
  grep -E "^step time" "$R/t_${b}_ep2_mbs8.log" | sed "s/^/  $b ep2 mbs 8: /" >> "$S"
done
run t_new_one 150 $NEW train $T --csv "$R/t_new_one.csv"
run t_new_dp2 150 $NEW train $T --dp 2 --csv "$R/t_new_dp2.csv"
grep -hE "^step time" "$R/t_new_one.log" "$R/t_new_dp2.log" | sed "s/^/  new one, dp2: /" >> "$S"
kill $SMI_PID 2>/dev/null; keep; cat "$S"
