#!/bin/sh
# Where do the validator's four streams stop absorbing the experts' row-tile waste?  One layer's expert GEMMs
# (forward, data and weight gradients) at 0.5 to 16 waves a launch, every expert the same rows (no waste), rows off
# the 128-row tile (the same waste on every expert) and rows drawn at cv 0.5, on one stream (v4) and four (v6), with
# nvidia-smi's clock beside.  Run from the repository root on one GPU with build/dev/expert_grouped built (make dev):
#   OUT=DIR sh docs/validation/2026-11-28-expert-tile-waste/sweep.sh
set -u
OUT=${OUT:?OUT=folder for the results}
BIN=${BIN:-build/dev/expert_grouped}
mkdir -p "$OUT"
date -u +%Y-%m-%dT%H:%M:%SZ > "$OUT/date.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
one() {   # model, file tag, options...
    model=$1 tag=$2
    shift 2
    "$BIN" "$model" --passes fwd,dgrad,wgrad "$@" 4 6 > "$OUT/$model-$tag.csv" 2> "$OUT/$model-$tag.err" ||
        echo "$model $tag: rc $?" >> "$OUT/failed.txt"
}
for r in 1024 512 2048; do
    one mixtral "even$r" --even --rows $r
    one mixtral "cv05-$r" --cv 0.5 --rows $r
done
for r in 960 1088; do one mixtral "even$r" --even --rows $r; done
for r in 512 1024 2048 4096 8192; do
    one test "even$r" --even --rows $r
    one test "cv05-$r" --cv 0.5 --rows $r
done
one test even1088 --even --rows 1088
for r in 1024 2048 4096; do
    one olmoe "even$r" --even --rows $r
    one olmoe "cv05-$r" --cv 0.5 --rows $r
done
one olmoe even1088 --even --rows 1088
for r in 3072; do
    one mixtral "even$r" --even --rows $r
    one mixtral "cv05-$r" --cv 0.5 --rows $r
done
kill $smi
date -u +%Y-%m-%dT%H:%M:%SZ >> "$OUT/date.txt"
