#!/bin/bash
# The device half of docs/validation/2026-11-28-overlap-classes, on 2 x H200 (NCCL_NVLS_ENABLE=0), from the repository
# root with build/sextant-gpu, build/sextant and .deps/lib built here:
#   PART=timelines  ZeRO-1 and ZeRO-3 with the profiling step's timeline (SEXTANT_TIMELINE) of OLMoE and Mixtral at
#                   random and of the OLMo-1B and Yi-6B shapes (the report's classes.py reads rank 0's);
#   PART=calibrate  calibrate --comm, its overlap with the step's other compute as victims (scripts/run_overlap.sh).
set -u
: "${OUT:?OUT names the folder the results go to}"
export LD_LIBRARY_PATH=$PWD/.deps/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
case "${PART:-calibrate}" in
timelines)
  ZM=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
  ZN=docs/validation/2026-11-27-h100x2-heldout-new/zoo_heldout.csv
  for m in olmoe-4l mixtral-2l; do
    SEXTANT_MOE_ROUTE=random LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$ZM MODEL=$m RUNS='^(dp2z1|dp2z3)$' TIMELINE='.' \
      OUT=$OUT/$m bash scripts/run_heldout_2gpu.sh > $OUT/$m.out 2>&1
  done
  for m in olmo-1b-8l yi-6b-6l; do
    MOE=0 STEPS=20 WARMUP=5 ZOO=$ZN MODEL=$m RUNS='^(dp2z1|dp2z3)$' TIMELINE='.' \
      OUT=$OUT/$m bash scripts/run_heldout_2gpu.sh > $OUT/$m.out 2>&1
  done ;;
calibrate)
  OUT=$OUT/overlap bash scripts/run_overlap.sh ;;
*) echo "run.sh: PART is timelines or calibrate" >&2; exit 2 ;;
esac
