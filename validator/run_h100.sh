#!/usr/bin/env bash
# One device call for the one-GPU validation reports (docs/validation/):
# calibrate, then train every model x micro-batch twice: on hwdb defaults
# (uncalibrated) and with the measured overlay (calibrated).  The binary is
# built on the development machine and carried with .deps/lib (GSL, libcsv,
# cJSON).  Everything lands in $OUT/results.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
GPU=${GPU:-h100-sxm}
R=$OUT/run; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
G=./build/sextant-gpu
$G calibrate --gpu "$GPU" --out "$R/$GPU.csv" > "$R/calibrate.log" 2>&1
for spec in "gpt2 8 1024" "gpt2 16 1024" "gpt2 32 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024" \
            "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
  set -- $spec
  n="${1}_mbs$2"
  $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps 20 --csv "$R/uncal_$n.csv" > "$R/uncal_$n.log" 2>&1
  $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps 50 --calibration "$R/$GPU.csv" --csv "$R/train_$n.csv" \
     --json "$R/train_$n.json" > "$R/train_$n.log" 2>&1
  echo "$n rc=$?"
done
cd "$OUT" && tar cf results.tar run && rm -rf run
tar xOf results.tar run/calibrate.log | grep -E "copy|layernorm|launch|fit"
for f in $(tar tf results.tar | grep "train_.*log"); do tar xOf results.tar $f | grep -E "^# sextant|loss .* ->|step time|tokens/s|predicted .* GiB|note:|rror"; done
for f in $(tar tf results.tar | grep "uncal_.*log"); do echo "$f: $(tar xOf results.tar $f | grep -E 'step time|predicted .* GiB|rror')"; done
tar xOf results.tar run/train_llama3.2-1b_mbs4.log | tail -42
