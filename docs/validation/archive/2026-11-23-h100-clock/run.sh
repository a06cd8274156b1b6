#!/usr/bin/env bash
# One device call on one H100: at what SM clock do the kernels run alone (calibrate) and
# inside a training step?  calibrate now logs the clock after every timed GEMM and attention
# shape (sx_sm_clock_probe); the training runs probe it after the listed ops of the
# profiling step and at the end of every timed step (SEXTANT_CLOCK_PROBE).  Binaries built
# on the development machine, carried with .deps/lib.  Results in $OUT/clock.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
GPU=${GPU:-h100-sxm}
R=$OUT/clock; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
G=./build/sextant-gpu
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader \
  -lms 200 > "$R/smi.csv" 2>/dev/null &
SMI=$!
stamp() { date +%Y/%m/%d\ %H:%M:%S.%3N; }
timeout 60 build/gpu/test_kernels --clock > "$R/test_clock.log" 2>&1; echo "test_clock rc=$?"
CAL="$R/$GPU.csv"
echo "calibrate $(stamp)" >> "$R/runs.txt"
timeout 170 $G calibrate --gpu "$GPU" --out "$CAL" > "$R/calibrate.log" 2>&1
rc=$?; echo "calibrate rc=$rc"; echo "end $(stamp)" >> "$R/runs.txt"
export SEXTANT_CLOCK_PROBE=attention,attention_bwd,qkv,qkv_dgrad,qkv_wgrad,mlp_up,mlp_down,mlp_down_dgrad,lm_head,lm_head_dgrad,cross_entropy,gelu,swiglu,attn_norm_bwd,optimizer
for spec in "flash llama3.2-1b 4 2048" "flash llama3.2-1b 2 2048" "flash gpt2 32 1024" "flash gpt2-medium 16 1024" \
            "unfused gpt2 32 1024" "unfused llama3.2-1b 4 2048"; do
  set -- $spec
  P=train; [ $1 = flash ] && P=flash
  n="${P}_${2}_mbs$3"
  echo "$n $(stamp)" >> "$R/runs.txt"
  timeout 90 $G train "$2" --gpu "$GPU" --mbs "$3" --seq "$4" --steps 40 --attention $1 --calibration "$CAL" \
     --csv "$R/$n.csv" > "$R/$n.log" 2>&1
  echo "$n rc=$?"; echo "end $(stamp)" >> "$R/runs.txt"
done
kill $SMI 2>/dev/null
bash validator/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt"; cat "$R/clocks.txt"
tail -3 "$R/test_clock.log"
for f in "$R"/*_mbs*.log; do echo "$(basename $f): $(grep -E 'step time' $f)"; done
cd "$OUT" && tar cf clock.tar clock && rm -rf clock
