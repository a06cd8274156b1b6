#!/usr/bin/env bash
# One device call, one GPU: the shipped overlay (hwdb/measured/h100-sxm.csv, fitted on GPT-2 124M's steps and
# timed on gpt2, gpt2-medium and llama3.2-1b shapes) predicting models and sequence lengths it never saw:
# gpt2-large, gpt2-xl, gpt-1.3b, llama3.2-3b, and llama3.2-1b at 4096 and 8192 tokens.  Builds nothing
# (build/sextant-gpu and .deps carried); $OUT gets heldout.tar (every log, CSV and JSON) and summary.txt.
set -u
. "$(dirname "$0")/device_env.sh"
: "${OUT:?OUT must name the folder the results go to}"
GPU=${GPU:-h100-sxm}
CAL=${CAL:-hwdb/measured/h100-sxm.csv}
STEPS=${STEPS:-40}
device_begin heldout
cp "$CAL" "$R/overlay.csv"
G=./build/sextant-gpu
for spec in "gpt2-large 4 1024 flash" "gpt2-xl 2 1024 flash" "gpt-1.3b 4 2048 flash" "gpt-1.3b 8 1024 unfused" \
            "llama3.2-3b 1 2048 flash" "llama3.2-3b 1 4096 flash" "llama3.2-1b 1 8192 flash" "llama3.2-1b 2 4096 unfused"; do
  set -- $spec
  n="${1}_mbs${2}_seq${3}_$4"
  timeout 150 $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps "$STEPS" --attention "$4" --calibration "$CAL" \
     --csv "$R/$n.csv" --json "$R/$n.json" > "$R/$n.log" 2>&1
  rc=$?
  echo "$n rc=$rc $(grep -hE 'step time|memory: peak' "$R/$n.log" | tr '\n' ' ')" | tee -a "$S"
  tar -C "$(dirname "$R")" -cf "$OUT/heldout.tar" heldout
done
