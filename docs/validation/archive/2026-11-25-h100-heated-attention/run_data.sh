#!/usr/bin/env bash
# One device call on one H100: the fused attention heated (SEXTANT_ATTENTION_HEAT=1) with the
# operands of calibrate --data normal (a training step's scales) against the default uniform
# [-1, 1): does the step's data draw more power under the cap, where alone it did not matter?
# Then the fused LLaMA mbs 1/4 and GPT-2 350M mbs 16 against the normal-data overlay.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/data; mkdir -p "$R"
G=./build/sextant-gpu
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader \
  -lms 200 > "$R/smi.csv" 2>/dev/null &
SMI=$!
stamp() { date +%Y/%m/%d\ %H:%M:%S.%3N; }
t0=$(date +%s)
for d in normal uniform; do
  echo "calibrate_heated_$d $(stamp)" >> "$R/runs.txt"
  SEXTANT_ATTENTION_HEAT=1 timeout 240 $G calibrate --gpu h100-sxm --data $d --out "$R/h100-sxm-heated-$d.csv" \
    > "$R/calibrate_heated_$d.log" 2>&1
  echo "heated $d calibrate rc=$? at $(( $(date +%s) - t0 )) s"; echo "end $(stamp)" >> "$R/runs.txt"
done
for spec in "llama3.2-1b 1 2048" "llama3.2-1b 4 2048" "gpt2-medium 16 1024"; do
  set -- $spec
  n="flash_${1}_mbs$2"
  echo "$n $(stamp)" >> "$R/runs.txt"
  timeout 60 $G train "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --steps 50 --attention flash \
     --calibration "$R/h100-sxm-heated-normal.csv" --csv "$R/$n.csv" --json "$R/$n.json" > "$R/$n.log" 2>&1
  echo "$n rc=$? at $(( $(date +%s) - t0 )) s"; echo "end $(stamp)" >> "$R/runs.txt"
done
kill $SMI 2>/dev/null
bash validator/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt"; cat "$R/clocks.txt"
for d in normal uniform; do echo "== heated $d"; sed -n "/^model heads/,/^$/p" "$R/calibrate_heated_$d.log" | grep -E "heads|llama3.2-1b  *[14]  *2048|gpt2-medium  *16  *1024|gpt2  *32  *1024"; done
for f in "$R"/flash_*.log; do echo "$(basename $f): $(grep -E 'step time' $f)"; done
cd "$OUT" && tar cf data.tar data && rm -rf data
