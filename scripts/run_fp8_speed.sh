#!/usr/bin/env bash
# FP8 against bf16 training steps at shapes where FP8's GEMMs can pay (issue 24: FP8 steps at 90% of the
# bf16 step's throughput per unit of work, or where the time goes): train's op-by-op table, measured and
# predicted, for each model in bf16 and in fp8, on one GPU.  Binaries carried in BIN_DIR.
#   OUT=DIR bash scripts/run_fp8_speed.sh     -> $OUT/summary.txt, $OUT/fp8-speed.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
device_begin fp8-speed
GPU=h100-sxm
grep -q H200 "$R/gpu.txt" && GPU=h200
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt"); hwdb GPU $GPU"
for shape in "gpt2-medium --mbs 16 --seq 1024" "llama3.2-1b --mbs 4 --seq 2048" "llama3.2-3b --mbs 2 --seq 4096"; do
    set -- $shape
    for p in bf16 fp8; do
        run "$1_$p" 120 "$B/sextant-gpu" train $shape --gpu $GPU --steps 20 --attention flash --precision $p
        say "  $(grep -E '^step +all' "$R/$1_$p.log")"
    done
done
