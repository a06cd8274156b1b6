#!/usr/bin/env bash
# One-GPU steps where the weight gradients' read of their gradient weighs most: few tokens a micro-batch (K 256-1024
# for Mixtral's experts, 1024 for the dense layers) on shapes 4096 wide, none of them in any fit, and one at 4096
# tokens beside them; each with the shipped overlay and --csv (docs/validation/2026-11-27-gemm-accumulate).  The
# models (LLaMA-3 8B and Mistral 7B cut to 4 layers, Yi-6B to 6, Mixtral 8x7B to 2) are that report's zoo_heldout.csv,
# their rows as the earlier reports ran them.
#   OUT=DIR bash scripts/run_accumulate_heldout.sh   (BIN_DIR: sextant-gpu; default build)
#   -> $OUT/summary.txt, $OUT/accumulate.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-build}
GPU=${GPU:-$(card_row)}
Z=docs/validation/2026-11-27-gemm-accumulate/zoo_heldout.csv
W=/tmp/accumulate-root
private_root "$W" "$Z" "$B/sextant-gpu"
device_begin accumulate
cp "$Z" "$R/zoo.csv"
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
RUNS=${RUNS:-llama3-8b-4l 1 1024 sextant|yi-6b-6l 1 1024 sextant|mistral-7b-4l 1 1024 sextant|mixtral-2l 1 1024 sextant|mixtral-2l 2 1024 sextant|llama3-8b-4l 4 1024 sextant}
train_steps "$W" 90 "$RUNS"
keep
