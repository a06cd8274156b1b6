#!/usr/bin/env bash
# The attention table again after the dK, dV split (b663dd9, kernels/attention.cu dkdv_splits: a kv head's query
# heads over more blocks where the backward's grid is under 264 blocks).  On the card that came (card_row: h200 or
# h100-sxm), in one call:
#   runs       the power-fit runs the split moved, exactly as they were run (same flags; --csv/--json/log beside),
#              priced with the card's shipped overlay: H200 flash_llama3.2-1b_mbs1 (scripts/run_h100.sh PART=2,
#              docs/validation/2026-11-26-h200x2-calibrated/one-gpu); H100 llama3.2-3b_mbs1_seq2048_flash
#              (scripts/run_heldout.sh, docs/validation/2026-11-25-h100-heldout) and flash_llama3.2-1b_mbs1
#              (scripts/run_h100.sh, docs/validation/2026-11-25-h100-power/run-power-model): LLaMA's 8 kv heads at
#              micro-batch 1 and 2048 tokens, a grid of 256 blocks;
#   calibrate  sextant-gpu calibrate --gpu ROW --no-step-fit --out R/calibrate.csv: the whole calibrate but the step
#              fit (calibrate has no flag that times the attention alone), the power model kept: with it the shapes
#              are timed cool, at the top clock, as the shipped tables were (--warm would also skip it, but then times
#              every shape warm, at the clock its power settles at: not the shipped tables' method).  The overlay goes
#              to the run folder only, never over hwdb/measured.
# PHASE=all (default) | runs | calibrate.  Builds nothing: build/ unpacked from .carry/pack/bins.tar.xz, .deps/lib
# carried.  Clocks sampled every 200 ms (R/smi.csv), each run's window in R/runs.txt, R/clocks.txt per run.
#   tar xJf .carry/pack/bins.tar.xz && OUT=DIR bash scripts/run_attention_retime.sh
#     -> $OUT/summary.txt, $OUT/attention-retime.tar
set -u
. "$(dirname "$0")/device_env.sh"
PHASE=${PHASE:-all}
G=./build/sextant-gpu
device_start attention-retime
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt"); PHASE=$PHASE"
sha256sum "$CAL" build/sextant-gpu > "$R/inputs.sha256"
device_sample "$R/smi.csv"
if [ "$PHASE" = all ] || [ "$PHASE" = runs ]; then
  if [ "$GPU" = h200 ]; then
    # scripts/run_h100.sh PART=2 GPU=h200 CAL=hwdb/measured/h200.csv MODES="unfused flash" UNCAL=0
    run_windowed flash_llama3.2-1b_mbs1 90 $G train llama3.2-1b --gpu "$GPU" --mbs 1 --seq 2048 --steps 50 --attention flash \
      --calibration "$CAL" --csv "$R/flash_llama3.2-1b_mbs1.csv" --json "$R/flash_llama3.2-1b_mbs1.json"
  else
    # scripts/run_heldout.sh (validator/run_heldout.sh then), STEPS=40
    run_windowed llama3.2-3b_mbs1_seq2048_flash 150 $G train llama3.2-3b --gpu "$GPU" --mbs 1 --seq 2048 --steps 40 \
      --attention flash --calibration "$CAL" --csv "$R/llama3.2-3b_mbs1_seq2048_flash.csv" \
      --json "$R/llama3.2-3b_mbs1_seq2048_flash.json"
    # scripts/run_h100.sh, its flash runs
    run_windowed flash_llama3.2-1b_mbs1 90 $G train llama3.2-1b --gpu "$GPU" --mbs 1 --seq 2048 --steps 50 --attention flash \
      --calibration "$CAL" --csv "$R/flash_llama3.2-1b_mbs1.csv" --json "$R/flash_llama3.2-1b_mbs1.json"
  fi
  for f in "$R"/*.log; do
    case $f in */calibrate.log) continue ;; esac
    n=$(basename "$f" .log)
    grep -E "^step time|^power:" "$f" | cut -c1-160 | sed "s/^/  $n: /" >> "$S"
    grep -E "^attention(_bwd)? " "$f" | sed "s/^/  $n: /" >> "$S"
  done
fi
if [ "$PHASE" = all ] || [ "$PHASE" = calibrate ]; then
  run_windowed calibrate 480 $G calibrate --gpu "$GPU" --no-step-fit --out "$R/calibrate.csv"
  grep -E "^shapes timed|^attention efficiency|^  forward [0-9.]+, backward|^SM clock" "$R/calibrate.log" >> "$S"
  say "calibrate: $(grep -c "^$GPU,flash_fwd_us" "$R/calibrate.csv" 2>/dev/null) fused forward shapes," \
      "$(grep -c "^$GPU,flash_bwd_us" "$R/calibrate.csv" 2>/dev/null) backward"
fi
kill $SMI_PID 2>/dev/null
bash scripts/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt" 2>/dev/null
cat "$R/clocks.txt" >> "$S"
keep
cat "$S"
