#!/usr/bin/env bash
# The day's final device call on one H100 (binaries built on the development machine, carried
# with .deps/lib): what `make gpu-test` runs on one GPU (test_kernels in full, check-gradients,
# tests/gpu/calibrate_check.sh), memcheck and racecheck of the norm tests (quick sizes), the
# embedding and norm rows of the benchmark (the position gradient's before/now pairs and knobs,
# the fp16 rows), and GPT-2 training runs with the overlay CAL.  Everything in $OUT/final.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
CAL=${CAL:?CAL: an overlay of an earlier calibrate}
R=$OUT/final; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
t0=$(date +%s)
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; }
timeout 400 build/gpu/test_kernels > "$R/test_kernels.log" 2>&1; step test_kernels $?
timeout 60 compute-sanitizer --tool memcheck build/gpu/test_kernels --quick --norm > "$R/memcheck.log" 2>&1; step memcheck $?
timeout 90 compute-sanitizer --tool racecheck build/gpu/test_kernels --quick --norm > "$R/racecheck.log" 2>&1; step racecheck $?
timeout 60 build/gpu/bench_kernels --embedding > "$R/bench_emb.log" 2>&1; step bench_emb $?
timeout 90 build/gpu/bench_kernels --norm > "$R/bench_norm.log" 2>&1; step bench_norm $?
timeout 60 build/sextant-gpu check-gradients > "$R/check_gradients.log" 2>&1; step check_gradients $?
timeout 100 bash tests/gpu/calibrate_check.sh build > "$R/calibrate_check.log" 2>&1; step calibrate_check $?
for spec in "gpt2 32 train unfused" "gpt2 32 flash flash" "gpt2 8 flash flash" "gpt2-medium 16 flash flash"; do
  set -- $spec
  n="$3_$1_mbs$2"
  timeout 90 build/sextant-gpu train "$1" --gpu h100-sxm --mbs "$2" --seq 1024 --steps 50 --attention "$4" \
     --calibration "$CAL" --csv "$R/$n.csv" > "$R/$n.log" 2>&1; step "$n" $?
done
tail -1 "$R/test_kernels.log"; grep -c FAIL "$R/test_kernels.log"
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$R"/memcheck.log "$R"/racecheck.log
echo "racecheck lines naming ln_backward_pos: $(grep -c ln_backward_pos "$R/racecheck.log")"
grep -E "layer0|layernorm_bwd_pos\(dx\+=\).*\(dwpe|embedding_bwd\((bf16|fp32)(,wpe)?\).*apply alone" "$R/bench_emb.log" | cut -c1-170
grep -E "f16|layernorm_bwd\(dx\+=\)|layernorm_bwd " "$R/bench_norm.log" | cut -c1-150
tail -2 "$R/check_gradients.log"; tail -2 "$R/calibrate_check.log"
for f in $(ls "$R"/*_mbs*.log); do echo "$(basename $f): $(grep -E '^loss|step time' $f | tr '\n' ' ')"; grep -E "^(embedding_bwd|attn_norm_bwd) " $f; done
cd "$OUT" && tar cf final.tar final && rm -rf final
