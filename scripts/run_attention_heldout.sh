#!/usr/bin/env bash
# Issue 24, item 5: models no fit has seen, and calibrate's attention table at head size 128 and 4096-8192
# tokens.  First, training steps of zoo rows cut in depth (llama2-7b and mistral-7b to 4 layers, gpt3-20b to 2;
# docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv) and two runs the earlier reports measured
# (llama3-8b-4l, gpt2), each with the shipped overlay and --csv, so the planner can price them again on the CPU;
# then `calibrate --no-step-fit` over gpt2, gpt2-medium, llama3.2-1b and gpt3-5b (head size 128, none of them a
# held-out model), whose attention rows the planner takes for head configurations it never timed.
# With `calibrate` as its argument it runs test_kernels --attention and calibrate only; with `train`, the steps only
# (one call of ten minutes holds one or the other).
# On the card that came (card_row: an H100 or an H200), priced with its shipped overlay; EXTRA adds steps
# ("model mbs seq attention|..."), as the H200 run added LLaMA 3.2 3B whole.
#   OUT=DIR bash scripts/run_attention_heldout.sh [calibrate|train]   -> $OUT/summary.txt, $OUT/ah-runs.tar
set -u
PHASE=${1:-all}
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
GPU=${GPU:-$(card_row)}
W=/tmp/ah
private_root "$W" docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv "$B/sextant-gpu"
device_begin ah-runs
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
STEPS="llama2-7b-4l 2 4096 sextant|llama2-7b-4l 4 2048 unfused|mistral-7b-4l 1 8192 sextant|gpt3-20b-2l 2 2048 sextant"
STEPS="$STEPS|gpt3-20b-2l 4 2048 unfused|llama3-8b-4l 4 4096 sextant|gpt2 16 1024 unfused"
# the earlier report's wide steps, again with this build (2026-11-26-h100-wide-heldout ran them before the fix)
STEPS="$STEPS|llama2-13b-4l 4 4096 sextant|llama3-70b-1l 2 4096 sextant|llama3-8b-4l 2 8192 sextant"
STEPS="$STEPS|llama3-8b-4l 4 2048 unfused|llama2-13b-4l 2 2048 unfused${EXTRA:+|$EXTRA}"
[ "$PHASE" = calibrate ] && STEPS=
train_steps "$W" 150 "$STEPS"
[ "$PHASE" = train ] && { keep; exit 0; }
run test_kernels 120 .carry/lead/gpu/test_kernels --attention
say "  $(tail -1 "$R/test_kernels.log")"
run calibrate 420 "$W/build/sextant-gpu" calibrate --gpu "$GPU" --no-step-fit \
    --gemm-models gpt2,gpt2-medium,llama3.2-1b,gpt3-5b --out "$R/calibrate.csv"
say "calibrate: $(grep -c "^$GPU,flash_fwd_us" "$R/calibrate.csv" 2>/dev/null) fused forward shapes"
keep
