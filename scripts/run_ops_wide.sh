#!/usr/bin/env bash
# The shipped H100 overlay against op-by-op timings of models wider than any it was calibrated on
# (issue 24, item 5: calibration that predicts shapes it never saw): `sextant-gpu ops` times every op of
# one micro-batch (GEMMs through cuBLAS, unfused attention, the memory-bound kernels; the optimizer on at
# most 512M parameters, scaled) beside the planner's prediction. Widths 4096 (llama3-8b, GQA), 5120
# (llama2-13b, MHA), 8192 (llama3-70b, GQA), at 2048-8192 tokens. Binaries carried in BIN_DIR.
#   OUT=DIR bash scripts/run_ops_wide.sh      -> $OUT/ops.tar (each model's log and CSV), $OUT/summary.txt
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
R=${TMPDIR:-/tmp}/ops-wide; rm -rf "$R"; mkdir -p "$R"
device_record "$R"
CAL=hwdb/measured/h100-sxm.csv
for run in "llama3-8b 1 4096" "llama3-8b 1 8192" "llama2-13b 1 4096" "llama3-70b 1 2048"; do
    set -- $run
    name="$1_mbs$2_seq$3"
    timeout 150 "$B/sextant-gpu" ops "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --calibration "$CAL" \
        --csv "$R/$name.csv" > "$R/$name.log" 2>&1
    echo "$name rc=$? $(grep 'step (sum of ops)' "$R/$name.log")" | tee -a "$OUT/summary.txt"
    tar -C "$(dirname "$R")" -cf "$OUT/ops.tar" ops-wide
done
