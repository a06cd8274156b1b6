#!/usr/bin/env bash
# Each rank's threads on the CPUs nearest its GPU (SEXTANT_CPU_BIND=gpu: nvmlDeviceSetCpuAffinity) against where the
# OS puts them (none), on the MoE held-out layouts whose host issues the most launches: OLMoE at TP 2 + SP (64
# experts a rank, a cuBLASLt launch each) and Mixtral at EP 2, both with the random route, alternated twice, with the
# profiling step's timelines (each call's host issue, per rank).  From the repository root with build/sextant-gpu and
# .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-cpu-bind/run.sh
# -> $OUT/topo.txt (nvidia-smi topo -m, lscpu), $OUT/{none,gpu}_{1,2}/ (each a held-out script's summary and tar)
set -u
. scripts/device_env.sh
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
{ nvidia-smi topo -m; lscpu | grep -E '^(CPU\(s\)|Model name|Socket|NUMA|Thread|Core)'; } > "$OUT/topo.txt" 2>&1
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
export SEXTANT_MOE_ROUTE=random
for i in 1 2; do
  for b in none gpu; do
    SEXTANT_CPU_BIND=$b LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=olmoe-4l RUNS='^tp2sp$' TIMELINE='^tp2sp$' \
      OUT=$OUT/${b}_$i/olmoe bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
    SEXTANT_CPU_BIND=$b LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=mixtral-2l RUNS='^ep2$' TIMELINE='^ep2$' \
      OUT=$OUT/${b}_$i/mixtral bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
  done
done
for d in "$OUT"/*_?/*; do echo "$d: $(grep -h 'step time' "$d/summary.txt" | cut -c1-120)"; done | tee "$OUT/steps.txt"
# one file back: the device call returns a handful
tar -C "$OUT" -cf "$OUT/runs.tar" none_1 gpu_1 none_2 gpu_2 && rm -rf "$OUT"/none_? "$OUT"/gpu_?
