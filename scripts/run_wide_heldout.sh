#!/usr/bin/env bash
# Held out beyond the calibrated widths, end to end (issue 24, item 5): the shipped H100 overlay predicting
# training steps of models 4096-8192 wide, cut in depth so that one GPU holds them (llama3-8b and llama2-13b
# to 4 layers, llama3-70b to 1; rows in docs/validation/archive/2026-11-26-h100-wide-heldout/zoo_wide.csv), trained by
# sextant-gpu train with the power cap in play, unlike `ops`' op-by-op timing.  sextant-gpu reads its zoo
# from its data root, so it runs from a copy at /tmp/wide (hwdb/ and that zoo).  Binaries in BIN_DIR.
#   OUT=DIR bash scripts/run_wide_heldout.sh   -> $OUT/summary.txt, $OUT/wide.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
W=/tmp/wide
private_root "$W" docs/validation/archive/2026-11-26-h100-wide-heldout/zoo_wide.csv "$B/sextant-gpu"
device_begin wide-runs
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
for c in "llama3-8b-4l 4 4096 sextant" "llama2-13b-4l 4 4096 sextant" "llama3-70b-1l 2 4096 sextant" \
         "llama3-8b-4l 2 8192 sextant" "llama3-8b-4l 4 2048 unfused" "llama2-13b-4l 2 2048 unfused"; do
    set -- $c
    name="$1_mbs$2_seq$3_$4"
    run "$name" 180 "$W/build/sextant-gpu" train "$1" --gpu h100-sxm --mbs "$2" --gbs "$2" --seq "$3" --attention "$4" \
        --steps 20 --warmup 5 --calibration hwdb/measured/h100-sxm.csv --csv "$R/$name.csv"
    say "  $(grep -E '^step +all' "$R/$name.log") | $(grep -E '^power:' "$R/$name.log" | cut -c1-60)"
done
