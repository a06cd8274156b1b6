#!/usr/bin/env bash
# One device call for sx_layernorm_backward_pos (layer 0's norm backward summing the position
# table's gradient): the norm and embedding tests, memcheck and racecheck on the quick sizes,
# the embedding rows of the benchmark (with the before/now pairs), the float64 gradient check,
# and GPT-2 training runs with the overlay CAL.  Binaries built on the development machine,
# carried with .deps/lib.  Everything in $OUT/pos.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
CAL=${CAL:?CAL: an overlay of an earlier calibrate}
R=$OUT/pos; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 150 build/gpu/test_kernels --norm > "$R/test_norm.log" 2>&1; step test_norm $?
[ -n "${WITH_EMB:-}" ] && { timeout 300 build/gpu/test_kernels --embedding > "$R/test_emb.log" 2>&1; step test_emb $?; }
timeout 120 compute-sanitizer --tool memcheck build/gpu/test_kernels --quick --norm > "$R/memcheck.log" 2>&1; step memcheck $?
timeout 120 compute-sanitizer --tool racecheck build/gpu/test_kernels --quick --norm > "$R/racecheck.log" 2>&1; step racecheck $?
timeout 150 build/gpu/bench_kernels --embedding > "$R/bench_emb.log" 2>&1; step bench_emb $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
[ -n "${SKIP_TRAIN:-}" ] || for spec in "gpt2 32 train unfused" "gpt2 32 flash flash" "gpt2 8 flash flash" "gpt2-medium 16 flash flash"; do
  set -- $spec
  n="$3_$1_mbs$2"
  timeout 90 build/sextant-gpu train "$1" --gpu h100-sxm --mbs "$2" --seq 1024 --steps 50 --attention "$4" \
     --calibration "$CAL" --csv "$R/$n.csv" > "$R/$n.log" 2>&1; step "$n" $?
done
grep -hE "checks|FAIL" "$R"/test_norm.log "$R"/test_emb.log 2>/dev/null | tail -6
grep -h "layernorm_bwd_pos" "$R/test_norm.log" | grep -v PASS | head -20; grep -c "layernorm_bwd_pos.*PASS" "$R/test_norm.log"
grep -c "ln_backward_pos" "$R/racecheck.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$R"/memcheck.log "$R"/racecheck.log
grep -E "layer0|layernorm_bwd|embedding_bwd\(bf16,wpe\)|embedding_bwd\(fp32,wpe\)|embedding_bwd\(bf16\)|embedding_bwd\(fp32\)" "$R/bench_emb.log" | grep -v "atomic\|sorted" | cut -c1-190
tail -3 "$R/check_gradients.log"
for f in $(ls "$R"/*_mbs*.log 2>/dev/null); do echo "$(basename $f): $(grep -E 'step time|loss|rror' $f | tail -3 | tr '\n' ' ')"; done
cd "$OUT" && tar cf pos.tar pos && rm -rf pos
