#!/usr/bin/env bash
# One device call: calibrate, then the op-by-op check and the training step
# of the GPT-2 family (and the op check of a LLaMA-style 1B), uncalibrated
# and calibrated. Everything lands in $OUT/results.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/run; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
G=./build/sextant-gpu
$G calibrate --gpu h100-sxm --out "$R/h100-sxm.csv" > "$R/calibrate.log" 2>&1
CAL="--calibration $R/h100-sxm.csv"
for spec in "gpt2 8 1024" "gpt2 16 1024" "gpt2 32 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024"; do
  set -- $spec
  $G train "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 50 $CAL --csv "$R/train_${1}_mbs$2.csv" > "$R/train_${1}_mbs$2.log" 2>&1
  $G ops "$1" --gpu h100-sxm --mbs "$2" --seq "$3" $CAL --csv "$R/ops_${1}_mbs$2.csv" > "$R/ops_${1}_mbs$2.log" 2>&1
done
for spec in "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
  set -- $spec
  $G ops "$1" --gpu h100-sxm --mbs "$2" --seq "$3" $CAL --csv "$R/ops_${1}_mbs$2.csv" > "$R/ops_${1}_mbs$2.log" 2>&1
done
cd "$OUT" && tar cf results.tar run && rm -rf run
tar xOf results.tar run/calibrate.log | grep -E "copy|layernorm|launch|fit"
for f in $(tar tf results.tar | grep "train_.*log"); do tar xOf results.tar $f | grep -E "^# sextant|loss .* ->|step time|tokens/s|predicted .* GiB|profiling pass"; done; tar xOf results.tar run/train_gpt2_mbs32.log | tail -40
for f in $(tar tf results.tar | grep 'ops_.*log'); do echo "$f: $(tar xOf results.tar $f | grep -E 'step \(sum')"; done
