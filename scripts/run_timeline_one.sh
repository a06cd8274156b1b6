#!/usr/bin/env bash
# One device call on one GPU: the held-out steps the shipped overlay predicts worst (GPT-2 1.5B, LLaMA-3.2 3B at
# 2048 tokens, LLaMA-3 70B cut to one layer; docs/validation/2026-11-26-h100-attention-heldout) and the MoE test
# model, each with every op call's start and end (SEXTANT_TIMELINE), so that idle gaps and unmarked work show.
# Carried: build/sextant-gpu, .deps/lib.   OUT=DIR bash scripts/run_timeline_one.sh  -> $OUT/timeline-one.tar
set -u
. "$(dirname "$0")/device_env.sh"
: "${OUT:?OUT must name the folder the results go to}"
GPU=${GPU:-$(card_row)}
W=/tmp/tl1
private_root "$W" docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv build/sextant-gpu
device_begin timeline-one
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
for c in "gpt2-xl 2 1024 sextant" "llama3.2-3b 1 2048 sextant" "llama3-70b-1l 2 4096 sextant" "moe-test 4 1024 sextant"; do
    set -- $c
    name="$1_mbs$2_seq$3_$4"
    gbs=$2; extra=; [ "$1" = moe-test ] && { gbs=16; extra="--lr 1e-3 --lr-warmup 3"; }
    SEXTANT_TIMELINE="$R/tl_$name" run "$name" 150 "$W/build/sextant-gpu" train "$1" --gpu "$GPU" --mbs "$2" --gbs $gbs \
        --seq "$3" --attention "$4" --steps 20 --warmup 5 $extra --calibration "hwdb/measured/$GPU.csv" --csv "$R/$name.csv"
    say "  $(grep -E '^step +all' "$R/$name.log") | $(grep -E '^power:' "$R/$name.log" | cut -c1-60)"
done
keep
