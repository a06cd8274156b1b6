#!/usr/bin/env bash
# One device call on one H100: calibrate's fused attention timed heated (SEXTANT_ATTENTION_HEAT=1:
# each call after one layer's GEMMs, twice over for the backward) and, as by default, back to
# back alone; then the nine fused one-GPU runs against the heated overlay.
# The back-to-back overlay's predictions for the same runs: `sextant estimate --calibration`
# offline (it reproduces train's prediction), see README.md.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/run; mkdir -p "$R"
G=./build/sextant-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader \
  -lms 200 > "$R/smi.csv" 2>/dev/null &
SMI=$!
stamp() { date +%Y/%m/%d\ %H:%M:%S.%3N; }
t0=$(date +%s)
echo "calibrate_heated $(stamp)" >> "$R/runs.txt"
SEXTANT_ATTENTION_HEAT=1 timeout 240 $G calibrate --gpu h100-sxm --out "$R/h100-sxm-heated.csv" > "$R/calibrate_heated.log" 2>&1
echo "heated calibrate rc=$? at $(( $(date +%s) - t0 )) s"; echo "end $(stamp)" >> "$R/runs.txt"
echo "calibrate_alone $(stamp)" >> "$R/runs.txt"
timeout 150 $G calibrate --gpu h100-sxm --out "$R/h100-sxm-alone.csv" > "$R/calibrate_alone.log" 2>&1
echo "alone calibrate rc=$? at $(( $(date +%s) - t0 )) s"; echo "end $(stamp)" >> "$R/runs.txt"
for spec in "gpt2 8 1024" "gpt2 16 1024" "gpt2 32 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024" \
            "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
  set -- $spec
  n="flash_${1}_mbs$2"
  echo "$n $(stamp)" >> "$R/runs.txt"
  timeout 60 $G train "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 50 --attention flash \
     --calibration "$R/h100-sxm-heated.csv" --csv "$R/$n.csv" --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "$n rc=$? at $(( $(date +%s) - t0 )) s"; echo "end $(stamp)" >> "$R/runs.txt"
done
kill $SMI 2>/dev/null
bash validator/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt"; cat "$R/clocks.txt"
for c in heated alone; do echo "== $c"; sed -n "/^fused causal attention/,/^$/p;/^model heads/,/^$/p" "$R/calibrate_$c.log" | grep -E "^B |forward|heads|llama3.2-1b  *[124]  *2048|gpt2-medium  *16  *1024|gpt2  *32  *1024"; done
for f in "$R"/flash_*.log; do echo "$(basename $f): $(grep -E 'step time' $f)"; done
# the device returns a limited number of files: one archive
cd "$OUT" && tar cf results.tar run && rm -rf run
