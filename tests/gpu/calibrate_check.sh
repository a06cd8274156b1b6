#!/usr/bin/env bash
# make gpu-test: calibrate on the GPU at hand for GPT-2's shapes, then check that the overlay it
# wrote holds what the planner needs and that the planner reads it:
#   - every one of GPT-2's linear layers (qkv, attn_out, mlp_up, mlp_down, lm_head) timed forward,
#     dgrad and wgrad at 1024 to 32768 tokens (duplicate shapes kept once);
#   - our fused attention's forward and backward for 12 heads at batch 1-32 and sequence 1024, 2048
#     (up to 32k tokens a batch, as calibrate times them), and the unfused attention's (cuBLAS batched
#     GEMMs and our softmax) at the same shapes;
#   - the optimizer's bandwidth (AdamW's fraction of the HBM), which `sextant hw` reports;
#   - a memory-bound kernel's fixed time between 0 and 20 us;
#   - `sextant hw` and `sextant estimate` accept it, and the estimate uses the measured shapes;
#   - where the GPU gives power readings: the power model's seven keys, the two the step fit
#     rewrites naming it, and an estimate that settles the clock under the cap.
# Usage: tests/gpu/calibrate_check.sh [BUILD]
set -u
B=${1:-build}
if ! nvidia-smi -L >/dev/null 2>&1; then echo "calibrate_check: no GPU, skipping"; exit 0; fi
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  *H100*) gpu=h100-sxm ;; *H200*) gpu=h200 ;; *A100*80GB*) gpu=a100-sxm4-80gb ;; *A100*) gpu=a100-sxm4-40gb ;;
  *) echo "calibrate_check: no hwdb row for '$name', skipping"; exit 0 ;;
esac
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "calibrate_check: FAIL: $*"; exit 1; }
"$B/sextant-gpu" calibrate --gpu $gpu --gemm-models gpt2 --out "$dir/cal.csv" > "$dir/cal.log" 2>&1 || { tail -5 "$dir/cal.log"; fail "calibrate exited $?"; }
grep -q "^$gpu,membound_overhead_us," "$dir/cal.csv" || fail "no membound_overhead_us row"
awk -F, -v g=$gpu '$1 == g && $2 == "membound_overhead_us" { exit !($3 > 0 && $3 < 20) }' "$dir/cal.csv" || fail "membound_overhead_us out of (0, 20)"
for t in 1024 2048 4096 8192 16384 32768; do
  for io in "768 2304" "768 768" "768 3072" "3072 768"; do
    set -- $io   # in out
    for key in "${t}x$2x$1" "${t}x$1x$2" "$1x$2x$t"; do
      grep -q "^$gpu,gemm_us:$key," "$dir/cal.csv" || fail "no GEMM row $key"
    done
  done
done
grep -q "^$gpu,gemm_us:1024x50304x768," "$dir/cal.csv" || fail "no lm_head row at 1024 tokens"
# the optimizer's bandwidth: AdamW below the copy's, and hw reports it
awk -F, -v g=$gpu '$1 == g && $2 == "optimizer_membound_efficiency" { found = 1; ok = $3 > 0.3 && $3 <= 1 }
  END { exit !(found && ok) }' "$dir/cal.csv" || fail "no optimizer_membound_efficiency in (0.3, 1]"
for p in fwd bwd; do
  for b in 1 2 4 8 16 32; do
    for t in 1024 2048; do
      [ $((b * t)) -le 32768 ] || continue   # calibrate times batches up to 32k tokens (calibrate_attention)
      grep -q "^$gpu,flash_${p}_us:$((12 * b))x${t}x64x$((12 * b))," "$dir/cal.csv" || fail "no flash_$p row for batch $b, seq $t"
      grep -q "^$gpu,unfused_${p}_us:$((12 * b))x${t}x64x$((12 * b))," "$dir/cal.csv" || fail "no unfused_$p row for batch $b, seq $t"
    done
  done
done
"$B/sextant" hw $gpu --calibration "$dir/cal.csv" > "$dir/hw.txt" 2>&1 || fail "sextant hw refused the overlay: $(head -1 "$dir/hw.txt")"
grep -q "measured shapes" "$dir/hw.txt" || fail "sextant hw does not report the measured shapes"
grep -q "optimizer step " "$dir/hw.txt" || fail "sextant hw does not report the optimizer's bandwidth"
"$B/sextant" explain gpt2 --gpu $gpu --gpus 1 --mbs 8 --gbs 8 --calibration "$dir/cal.csv" > "$dir/explain.txt" 2>&1 ||
  fail "sextant explain refused the overlay"
grep -q "GEMM shapes, " "$dir/explain.txt" || fail "the estimate does not use the measured shapes"
# the unfused step's attention takes the unfused table: the step moves when its rows are left out
grep -v ",unfused_" "$dir/cal.csv" > "$dir/cal-no-unfused.csv"
step_of() {
  "$B/sextant" estimate gpt2 --gpu $gpu --gpus 1 --mbs 8 --gbs 8 --attention unfused --recompute none --no-dropout \
    --calibration "$1" --format json 2>/dev/null | grep -o '"step_s":[^,]*' | head -1 | sed 's/.*:[[:space:]]*//'
}
with=$(step_of "$dir/cal.csv"); without=$(step_of "$dir/cal-no-unfused.csv")
[ -n "$with" ] && [ -n "$without" ] || fail "sextant estimate --attention unfused --format json gave no step_s"
[ "$with" != "$without" ] || fail "the unfused attention's rows do not change the estimate ($with s both ways)"
# the power model and its step fit (calibrate's default)
power="no power model (no NVML power readings)"
if grep -q "^$gpu,power_cap_w," "$dir/cal.csv"; then
  for k in clock_max_mhz power_static_w energy_gemm_pj_per_flop energy_attention_pj_per_flop energy_pj_per_byte clock_energy_exponent; do
    [ "$(grep -c "^$gpu,$k," "$dir/cal.csv")" = 1 ] || fail "the power model has not exactly one $k row"
  done
  for k in clock_energy_exponent energy_attention_pj_per_flop; do
    grep -q "^$gpu,$k,.*calibrate step fit .* on 6 validate runs" "$dir/cal.csv" || fail "the step fit did not rewrite $k"
  done
  "$B/sextant" estimate gpt2 --gpu $gpu --gpus 1 --mbs 32 --gbs 32 --calibration "$dir/cal.csv" | grep -q "power cap:" ||
    fail "the estimate does not settle GPT-2's clock under the power cap"
  power="power model and step fit: $(grep '^clock exponent' "$dir/cal.log")"
fi
echo "calibrate_check: $power"
echo "calibrate_check: PASS ($(grep -c gemm_us "$dir/cal.csv") GEMM shapes, $(grep -c flash_ "$dir/cal.csv") fused and" \
     "$(grep -c unfused_ "$dir/cal.csv") unfused attention rows," \
     "memory-bound fixed time $(awk -F, '$2 == "membound_overhead_us" { print $3 }' "$dir/cal.csv") us)"
