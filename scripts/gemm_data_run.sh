#!/usr/bin/env bash
# One device call on one H100 (GPU=h200 for an H200): why do the step's GEMMs run slower than
# calibrate timed them?  (docs/validation/archive/2026-11-23-h100-clock-scaled: fused LLaMA at
# micro-batch 4, GEMMs 4-15% slower in the step.)  Two suspects, told apart here:
#   - the operands' values: calibrate times uniform [-1, 1) data; under the power cap a GEMM's
#     clock follows its operands' switching.  calibrate --data uniform and --data normal;
#   - the step around the GEMM: SEXTANT_REPLAY=10 replays every GEMM and attention of one more step
#     10 times back to back on the step's own operands.  Replay = in-step time: the context is
#     innocent and the data is the suspect; replay = calibrate: the context is.
# Results land in $OUT/gemmdata.  It ran on 2026-11-24 (docs/validation/2026-11-24-h100-step/gemm-data/).
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-h100-sxm}
R=$OUT/gemmdata; mkdir -p "$R"
device_record "$R"
device_sample "$R/smi.csv"
t0=$(date +%s)
stamp() { date +%Y/%m/%d\ %H:%M:%S.%3N; }
step() { echo "$1 rc=$2 at $(( $(date +%s) - t0 )) s" | tee -a "$R/summary.txt"; echo "end $(stamp)" >> "$R/runs.txt"; }
G=build/sextant-gpu
for D in uniform normal; do
  echo "calibrate_$D $(stamp)" >> "$R/runs.txt"
  timeout 160 $G calibrate --gpu "$GPU" --data $D --out "$R/$GPU-$D.csv" > "$R/calibrate_$D.log" 2>&1; step calibrate_$D $?
done
for spec in "llama3.2-1b 4 2048 flash" "gpt2 32 1024 unfused" "gpt2-medium 16 1024 flash"; do
  set -- $spec
  n="$4_$1_mbs$2"
  echo "$n $(stamp)" >> "$R/runs.txt"
  SEXTANT_REPLAY=10 timeout 100 $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps 30 --attention "$4" \
    --calibration "$R/$GPU-uniform.csv" --csv "$R/$n.csv" > "$R/$n.log" 2>&1; step "$n" $?
done
kill $SMI_PID 2>/dev/null
bash scripts/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt" 2>/dev/null; cat "$R/clocks.txt"
grep -E "operands|efficiency\(F\)" "$R"/calibrate_*.log
for f in "$R"/*_mbs*.log; do echo "== $f"; grep -E "step time" "$f"; sed -n "/^Replayed/,\$p" "$f" | head -40; done
