#!/usr/bin/env bash
# Shapes wider than any the H100 overlay's fit or table has seen, after calibrate's GEMM table was re-timed on fresh
# operands (docs/validation/2026-11-27-h100-calibrate-operands): GPT-3 175B cut to one layer (width 12288, 96 heads
# of 128, MHA, GELU), Nemotron-4 15B cut to two (6144, GQA 48/8, GELU, a 256k vocabulary) and LLaMA-2 70B cut to one
# (8192, GQA 64/8, SwiGLU, a 32k vocabulary), each with the shipped overlay and --csv
# (docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv).
#   OUT=DIR bash scripts/run_heldout_wide.sh   (BIN_DIR: sextant-gpu; default build) -> $OUT/summary.txt, $OUT/wide.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-build}
GPU=${GPU:-$(card_row)}
W=/tmp/wide-root   # not R: device_begin empties /tmp/wide
private_root "$W" docs/validation/2026-11-27-h100-heldout-wide/zoo_heldout.csv "$B/sextant-gpu"
device_begin wide
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
# RUNS: "model mbs seq attention" items separated by "|" (the first call's four by default; the trainer refused
# Nemotron's family, so the second call ran two others)
RUNS=${RUNS:-gpt3-175b-1l 1 2048 sextant|nemotron-4-15b-2l 2 4096 sextant|llama2-70b-1l 2 4096 sextant|gpt3-175b-1l 2 2048 unfused}
train_steps "$W" 60 "$RUNS"
keep
