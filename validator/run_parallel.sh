#!/usr/bin/env bash
# One device call on 2 x H200: the multi-GPU training step's equivalence with
# one GPU (loss of every step, same data and weights), then timed layouts.
# Binary built on the development machine, carried with .deps/lib.
# PHASE=equiv | timed | all (default all).  Results in $OUT/results.tar.
set -u
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0
GPU=${GPU:-h200}
PHASE=${PHASE:-all}
R=$OUT/run; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > "$R/gpu.txt" 2>&1
date -u +%Y-%m-%dT%H:%M:%SZ > "$R/date.txt"
G=./build/sextant-gpu
run() { # name, args...
  local n=$1; shift
  timeout 300 $G train "$@" > "$R/$n.log" 2>&1
  echo "$n rc=$?"
}
if [ "$PHASE" = equiv ] || [ "$PHASE" = all ]; then
  for model in gpt2 llama3.2-1b; do
    E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
    run "eq_${model}_1gpu" $E --losses "$R/eq_${model}_1gpu.txt"
    for lay in "tp2:--tp 2" "tp2sp:--tp 2 --sp" "pp2:--pp 2" "dp2:--dp 2" "dp2z1:--dp 2 --zero 1" "rc:--recompute full" \
               "tp2sprc:--tp 2 --sp --recompute full"; do
      name=${lay%%:*}; flags=${lay#*:}
      run "eq_${model}_$name" $E $flags --losses "$R/eq_${model}_$name.txt"
    done
  done
fi
if [ "$PHASE" = timed ] || [ "$PHASE" = all ]; then
  run t_llama_tp2 llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 15 --tp 2 --csv "$R/t_llama_tp2.csv"
fi
cd "$OUT" && tar cf results.tar run && rm -rf run
for f in $(tar tf results.tar | grep "eq_.*txt$"); do echo "$f: $(tar xOf results.tar $f | awk '{printf "%s ", $2}')"; done
for f in $(tar tf results.tar | grep "\.log$"); do echo "== $f"; tar xOf results.tar $f | grep -E "rror|rank [0-9]+:|loss .* ->|step time|memory:|DID NOT" | head -8; done
tar xOf results.tar run/t_llama_tp2.log 2>/dev/null | tail -60
