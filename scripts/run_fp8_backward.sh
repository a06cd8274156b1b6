#!/usr/bin/env bash
# Issue 22/24, FP8: calibrate (default, cool) with the FP8 GEMMs timed with and without fast accumulation, then
# llama3.2-3b and llama3.2-1b trained in fp8 and bf16 on the shipped overlay (--csv, priced again on the CPU).
#   OUT=DIR bash scripts/run_fp8_backward.sh   -> $OUT/summary.txt, $OUT/fp8-runs.tar
set -u
. scripts/device_env.sh
R=/tmp/fp8-runs; mkdir -p $R; S=$OUT/summary.txt; : > $S; device_record $R
say "device: $(sed -n 2p $R/gpu.txt); $(cat $R/date.txt)"
run calibrate 330 .carry/lead/sextant-gpu calibrate --gpu h100-sxm --no-step-fit --out $R/calibrate.csv
say "  $(grep -E '^FP8 GEMMs' $R/calibrate.log | tail -2 | tr '\n' ' ')"
for c in "llama3.2-3b 2 4096 fp8" "llama3.2-3b 2 4096 bf16" "llama3.2-1b 4 2048 fp8" "llama3.2-1b 4 2048 bf16"; do
  set -- $c; n="$1_mbs$2_seq$3_$4"
  run $n 150 .carry/lead/sextant-gpu train $1 --gpu h100-sxm --mbs $2 --gbs $2 --seq $3 --precision $4 --attention sextant --steps 20 --warmup 5 --calibration hwdb/measured/h100-sxm.csv --csv $R/$n.csv
  say "  $(grep -E '^step +all' $R/$n.log) | $(grep -E '^power:' $R/$n.log | cut -c1-60)"
done
keep
