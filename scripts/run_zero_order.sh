#!/usr/bin/env bash
# One device call on 2 GPUs: ZeRO-3 with the reduce-scatters queued behind the next take's gathers and the big
# bucket's gather two uses ahead (validator/zero.c, zero_plan.c) against the build before (.carry/old), steps
# in turns, with the new build's timelines (SEXTANT_TIMELINE); then the losses of both against one GPU.
# Carried: build/sextant, build/sextant-gpu, .carry/old/{sextant,sextant-gpu}, .deps/lib.
#   OUT=DIR PHASE=timed|equiv|all bash scripts/run_zero_order.sh
set -u
. "$(dirname "$0")/device_env.sh"
PHASE=${PHASE:-all}
NEW=./build/sextant
OLD=./.carry/old/sextant
device_start zero-order

if [ "$PHASE" = all ] || [ "$PHASE" = timed ]; then
  L3="llama3.2-3b --gpu $GPU --seq 2048 --mbs 1 --gbs 16 --steps 8 --warmup 3 --dp 2 --timeout 60"
  L1="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 10 --warmup 3 --dp 2 --timeout 60"
  M="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12 --warmup 3 --dp 2 --timeout 60"
  for family in "llama3b:$L3" "llama1b:$L1" "gpt2:$M"; do
    tag=${family%%:*}; args=${family#*:}
    for round in 1 2; do
      for b in old new; do
        bin=$NEW; [ $b = old ] && bin=$OLD
        [ "$tag" != llama3b ] && [ $round = 2 ] && continue
        name=${tag}_z3_${b}$round
        SEXTANT_TIMELINE="$R/tl_$name" run "t_$name" 150 $bin validate $args --zero 3 --calibration "$CAL" --csv "$R/t_$name.csv"
        grep -E "^step time|^memory:" "$R/t_$name.log" | cut -c1-160 | sed "s/^/  $name: /" >> "$S"
      done
    done
  done
fi

if [ "$PHASE" = all ] || [ "$PHASE" = equiv ]; then
  G=./build/sextant-gpu
  for model in gpt2 llama3.2-1b; do
    E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
    run "eq_${model}_1gpu" 120 $G train $E --losses "$R/eq_${model}_1gpu.txt"
    for b in old new; do
      g=$G; [ $b = old ] && g=./.carry/old/sextant-gpu
      for lay in "z3:--dp 2 --zero 3" "z3rc:--dp 2 --zero 3 --recompute full"; do
        name=eq_${model}_${lay%%:*}_$b
        run "$name" 120 $g train $E ${lay#*:} --losses "$R/$name.txt"
        say "  $(compare "$R/eq_${model}_1gpu.txt" "$R/$name.txt")  $model ${lay%%:*} $b against one GPU"
      done
    done
    for lay in z3 z3rc; do
      if cmp -s "$R/eq_${model}_${lay}_old.txt" "$R/eq_${model}_${lay}_new.txt"; then
        say "  $model $lay: new and old losses identical bit for bit"
      else
        say "  $model $lay: new and old losses differ"
      fi
    done
  done
fi
keep
