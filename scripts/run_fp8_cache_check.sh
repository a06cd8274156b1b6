#!/usr/bin/env bash
# After the FP8 path cast each weight once per step and each output gradient once for its two GEMMs
# (validator/fp8.c): the FP8 operands are the same bytes, so FP8 training's per-step losses must match
# the binary before (BIN_OLD) byte for byte; check-fp8 (now also through the weight cache); then bf16
# against fp8 step times with the new binary (scripts/run_fp8_speed.sh).  Carried: .carry/lead (old)
# and .carry/new/sextant-gpu.
#   OUT=DIR bash scripts/run_fp8_cache_check.sh   -> $OUT/summary.txt, $OUT/fp8-cache.tar, $OUT/speed/
set -u
. "$(dirname "$0")/device_env.sh"
OLD=${BIN_OLD:-.carry/lead/sextant-gpu}
NEW=${BIN_NEW:-.carry/new/sextant-gpu}
device_begin fp8-cache
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
i=0
for t in "gpt2 --seq 256 --mbs 2 --gbs 8" "llama3.2-1b --seq 256 --mbs 2 --gbs 8" "gpt2 --seq 256 --mbs 2 --gbs 16"; do
    i=$((i + 1))
    for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        timeout 120 "$bin" train $t --steps 12 --warmup 2 --attention flash --precision fp8 --losses "$R/$i.$b.txt" \
            > "$R/$i.$b.log" 2>&1
        echo "rc=$?" >> "$R/$i.$b.log"
    done
    if [ -s "$R/$i.old.txt" ] && cmp -s "$R/$i.old.txt" "$R/$i.new.txt"; then say "SAME  fp8 $t"; else say "DIFF  fp8 $t"; fi
    keep
done
run check_fp8 60 "$NEW" check-fp8
mkdir -p "$OUT/speed"
OUT=$OUT/speed BIN_DIR=.carry/new bash "$(dirname "$0")/run_fp8_speed.sh"
