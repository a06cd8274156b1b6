#!/usr/bin/env bash
# ZeRO-2 and ZeRO-3 in the training step (issue 24, item 1), on a lent 2 x H100 (or H200):
#   equiv  every step's loss of --dp 2 with ZeRO-1, 2, 3 and ZeRO-3 with full recomputation
#          against one GPU, gpt2 and llama3.2-1b, the tolerance of tests/gpu/parallel_equivalence.sh
#          (1% at any step, 0.5% at the last); each run's log kept;
#   timed  `sextant validate` gpt2 and llama3.2-1b on 2 GPUs with --zero 1, 2 and 3, calibrated with
#          hwdb/measured/h100-sxm.csv: step time, the exposed part of every collective (the
#          *_exposed rows), peak memory per rank against the planner;
#   plan   a ZeRO-3 plan (llama3.2-3b on 64 H100s) validated as its 2-GPU slice (validate --plan);
#   suite  tests/gpu/parallel_equivalence.sh with ONLY=zero (make gpu-test's check of these layouts);
#   ab     a change to the ZeRO step measured: ZeRO 2 and 3 (and 1 once) on llama3.2-1b, llama3.2-3b and gpt2
#          timed with this build and with BEFORE (a build folder of an earlier commit: its sextant and
#          sextant-gpu), in turns, then the losses of ZeRO-2, ZeRO-3 and ZeRO-3 with recomputation against one
#          GPU with this build.
# Binaries built on the development machine, carried with .deps/lib.
# PHASE=equiv | timed | plan | suite | ab | all (default: equiv, timed and plan; about 8 minutes).
# GPU and CAL default to the card that came and its shipped overlay.
# Results: $OUT/zero.tar (zero/: logs, loss files, CSVs, JSON) and $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-$(card_row)}
PHASE=${PHASE:-all}
CAL=${CAL:-hwdb/measured/$GPU.csv}
# the runs' files gather outside $OUT (few files come back from a call): $OUT gets the tar and the summary
device_begin zero
G=./build/sextant-gpu
B=./build/sextant
# say, keep, run NAME TIMEOUT COMMAND... and compare (parallel_equivalence.sh's judge) come from device_env.sh

if [ "$PHASE" = equiv ] || [ "$PHASE" = all ]; then
  for model in gpt2 llama3.2-1b; do
    equiv "$model" "$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step" \
      "dp2z1:--dp 2 --zero 1" "dp2z2:--dp 2 --zero 2" "dp2z3:--dp 2 --zero 3" "dp2z3rc:--dp 2 --zero 3 --recompute full"
  done
fi

if [ "$PHASE" = timed ] || [ "$PHASE" = all ]; then
  M="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12 --dp 2 --gpus 2"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 12 --dp 2 --gpus 2"
  for spec in "gpt2_z1:$M --zero 1" "gpt2_z2:$M --zero 2" "gpt2_z3:$M --zero 3" \
              "llama_z1:$L --zero 1" "llama_z2:$L --zero 2" "llama_z3:$L --zero 3"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t_$name" 240 $B validate $args --calibration "$CAL" --csv "$R/t_$name.csv" --json "$R/t_$name.json"
    grep -E "^step time|^memory:|^ZeRO-|^predicted step|^[01] " "$R/t_$name.log" | cut -c1-220 | sed "s/^/  $name: /" >> "$S"
    grep -E "^dp_|^step {2,}" "$R/t_$name.log" | sed "s/^/  $name: /" >> "$S"
  done
fi

if [ "$PHASE" = plan ] || [ "$PHASE" = all ]; then
  $B estimate llama3.2-3b --gpu "$GPU" --gpus 64 --tp 1 --pp 1 --mbs 1 --gbs 512 --seq 4096 --zero 3 --attention flash \
    --format json > "$R/plan_llama3b_z3.json" 2> "$R/plan_llama3b_z3.err"
  run "plan_llama3b_z3" 300 $B validate --plan "$R/plan_llama3b_z3.json" --gpus 2 --steps 10 --calibration "$CAL" \
    --csv "$R/plan_llama3b_z3.csv"
  grep -E "^# slice|^# share|^# the plan's peak|^step time|^memory:|^ZeRO-|^dp_" "$R/plan_llama3b_z3.log" | cut -c1-220 | \
    sed "s/^/  plan: /" >> "$S"
fi

if [ "$PHASE" = ab ]; then
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 12"
  L3="llama3.2-3b --gpu $GPU --seq 2048 --mbs 1 --gbs 16 --steps 12"
  M="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12"
  for family in "llama:$L" "llama3b:$L3" "gpt2:$M"; do
    tag=${family%%:*}; args=${family#*:}
    for z in 1 2 3; do
      for bin in ${BEFORE:+$BEFORE/sextant} $B; do
        when=after; [ "$bin" = "${BEFORE:-}/sextant" ] && when=before
        [ "$z" = 1 ] && [ "$when" = before ] && continue
        name=${tag}_z${z}_$when
        run "t_$name" 150 $bin validate $args --dp 2 --zero $z --timeout 60 --calibration "$CAL" --csv "$R/t_$name.csv"
        grep -E "^step time|^memory:" "$R/t_$name.log" | cut -c1-200 | sed "s/^/  $name: /" >> "$S"
      done
    done
  done
  for model in gpt2 llama3.2-1b; do
    equiv "$model" "$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step" \
      "dp2z2:--dp 2 --zero 2" "dp2z3:--dp 2 --zero 3" "dp2z3rc:--dp 2 --zero 3 --recompute full"
  done
fi

if [ "$PHASE" = suite ]; then
  ONLY=zero timeout 580 bash tests/gpu/parallel_equivalence.sh $G $GPU > "$R/suite.log" 2>&1
  say "suite rc=$?"; cat "$R/suite.log" >> "$S"
  keep
fi

keep
cat "$S"
