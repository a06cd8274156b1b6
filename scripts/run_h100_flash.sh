#!/usr/bin/env bash
# One device call: the nine one-GPU training runs of docs/validation/archive/2026-11-23-h100-train again with
# --attention flash, predicted with that report's calibration overlay (same GPU model).  $OUT/results.tar.
set -u
. "$(dirname "$0")/device_env.sh"
CAL=docs/validation/archive/2026-11-23-h100-train/h100-sxm.csv
R=$OUT/run; mkdir -p "$R"
device_record "$R"
for spec in "gpt2 8 1024" "gpt2 16 1024" "gpt2 32 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024" \
            "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
  set -- $spec
  n="${1}_mbs$2"
  ./build/sextant validate "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 30 --attention flash --calibration "$CAL" \
     --csv "$R/flash_$n.csv" --json "$R/flash_$n.json" > "$R/flash_$n.log" 2>&1
  echo "$n rc=$?"
done
cd "$OUT" && tar cf results.tar run && rm -rf run
for f in $(tar tf results.tar | grep "flash_.*log"); do tar xOf results.tar $f | grep -E "^# sextant|loss .* ->|step time|tokens/s|predicted .* GiB|rror"; done
tar xOf results.tar run/flash_gpt2_mbs32.log | grep -E "^attention"
