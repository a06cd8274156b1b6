#!/usr/bin/env bash
# After a refactor of the validator: the same training runs with the binary before (BIN_OLD) and after
# (BIN_NEW) on one GPU, their per-step losses compared byte for byte; then the new binary's kernel checks
# (test_kernels --quick), check-gradients and check-fp8. Carried: .carry/old/sextant-gpu, .carry/lead/.
#   OUT=DIR bash scripts/run_split_check.sh   -> $OUT/summary.txt, $OUT/split.tar
set -u
. "$(dirname "$0")/device_env.sh"
OLD=${BIN_OLD:-.carry/old/sextant-gpu}
NEW=${BIN_NEW:-.carry/lead/sextant-gpu}
R=${TMPDIR:-/tmp}/split; rm -rf "$R"; mkdir -p "$R"
device_record "$R"
S=$OUT/summary.txt; : > "$S"
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
i=0
for run in "gpt2 --attention flash" "gpt2 --attention unfused --recompute full" "llama3.2-1b --attention flash" \
           "gpt2 --attention flash --precision fp8" "moe-test --attention flash --lr 1e-3"; do
    i=$((i + 1))
    for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        timeout 120 "$bin" train $run --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --losses "$R/$i.$b.txt" \
            > "$R/$i.$b.log" 2>&1
        echo "rc=$?" >> "$R/$i.$b.log"
    done
    if cmp -s "$R/$i.old.txt" "$R/$i.new.txt"; then say "SAME  $run"; else say "DIFF  $run"; fi
    keep
done
timeout 200 .carry/lead/gpu/test_kernels --quick > "$R/test_kernels.log" 2>&1; say "test_kernels --quick rc=$? $(tail -1 "$R/test_kernels.log")"
timeout 60 "$NEW" check-gradients > "$R/check_gradients.log" 2>&1; say "check-gradients rc=$?"
timeout 60 "$NEW" check-fp8 > "$R/check_fp8.log" 2>&1; say "check-fp8 rc=$?"
keep
