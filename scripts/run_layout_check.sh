#!/usr/bin/env bash
# After the layout flags moved to the planner's parser (planner/layout_flags.c) and train_options took a
# layout_t: the parallel layouts on 2 GPUs with the binary before (BIN_OLD) and after (BIN_NEW), their
# per-step losses compared byte for byte; run_split_check.sh covers one GPU.  Also: the new binary's
# --attention sextant against the old binary's --attention flash (the same kernel), and a plan's slice.
# Carried: .carry/old/sextant-gpu, .carry/lead/sextant-gpu and .carry/lead/sextant (for the plan).
#   OUT=DIR bash scripts/run_layout_check.sh   -> $OUT/summary.txt, $OUT/layout.tar
set -u
. "$(dirname "$0")/device_env.sh"
OLD=${BIN_OLD:-.carry/old/sextant-gpu}
NEW=${BIN_NEW:-.carry/lead/sextant-gpu}
PLANNER=${PLANNER:-.carry/lead/sextant}
R=${TMPDIR:-/tmp}/layout; rm -rf "$R"; mkdir -p "$R"
device_record "$R"
S=$OUT/summary.txt; : > "$S"
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
COMMON="--seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2"
i=0
# run_both NAME OLD_ARGS NEW_ARGS: both binaries, losses compared
run_both() {
    i=$((i + 1))
    timeout 150 "$OLD" train $2 $COMMON --losses "$R/$i.old.txt" > "$R/$i.old.log" 2>&1; echo "rc=$?" >> "$R/$i.old.log"
    timeout 150 "$NEW" train $3 $COMMON --losses "$R/$i.new.txt" > "$R/$i.new.log" 2>&1; echo "rc=$?" >> "$R/$i.new.log"
    if [ -s "$R/$i.old.txt" ] && cmp -s "$R/$i.old.txt" "$R/$i.new.txt"; then say "SAME  $1"; else say "DIFF  $1"; fi
    keep
}
for layout in "gpt2 --tp 2 --sp" "gpt2 --pp 2 --vpp 2" "gpt2 --dp 2 --zero 1" "llama3.2-1b --dp 2 --zero 3" \
              "gpt2 --cp 2 --attention flash" "moe-test --dp 2 --ep 2 --attention flash --lr 1e-3" \
              "gpt2 --tp 2 --attention flash --recompute full"; do
    run_both "$layout" "$layout" "$layout"
done
run_both "gpt2 --attention flash (old) = --attention sextant (new)" "gpt2 --attention flash" "gpt2 --attention sextant"
# a 4-GPU plan's slice on the 2 GPUs here: the same slice printed and trained by both
"$PLANNER" estimate llama3.2-1b --gpu h100-sxm --gpus 4 --tp 1 --pp 2 --mbs 2 --gbs 16 --seq 256 --zero 1 --format json \
    > "$R/plan.json" 2> "$R/plan.err"
for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    timeout 150 "$bin" train --plan "$R/plan.json" --gpus 2 --steps 12 --warmup 2 --losses "$R/plan.$b.txt" \
        > "$R/plan.$b.log" 2>&1
    echo "rc=$?" >> "$R/plan.$b.log"
done
if [ -s "$R/plan.old.txt" ] && cmp -s "$R/plan.old.txt" "$R/plan.new.txt"; then say "SAME  --plan slice"; else say "DIFF  --plan slice"; fi
keep
