#!/usr/bin/env bash
# One device call: calibrate, then the op-by-op check of three models at three
# micro-batch sizes, uncalibrated and calibrated. Results under $OUT.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
R=$OUT/run; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
./build/sextant-gpu calibrate --gpu h100-sxm --out "$R/h100-sxm.csv" > "$R/calibrate.log" 2>&1
for spec in "gpt2 4 1024" "gpt2 8 1024" "gpt2 16 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024" \
            "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
  set -- $spec
  ./build/sextant-gpu ops "$1" --gpu h100-sxm --mbs "$2" --seq "$3" --csv "$R/ops_${1}_mbs$2.csv" > "$R/ops_${1}_mbs$2.log" 2>&1
done
cd "$OUT" && tar cf results.tar run && rm -rf run
cat "$OUT"/../dev/null 2>/dev/null
tar xOf results.tar run/calibrate.log | tail -40
tar xOf results.tar run/ops_gpt2_mbs8.log
