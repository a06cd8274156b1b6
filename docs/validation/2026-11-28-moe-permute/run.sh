#!/usr/bin/env bash
# The permutation's tiled kernels (kernels/moe.cu, sx_moe_permute) on one GPU: the kernels' test, the dev program
# (version 1, a block an expert, against 2, the tiles: checks and benchmark), then OLMoE and Mixtral at random on one
# GPU, the step's moe_permute against its price.  From the repository root with build/ (sextant-gpu,
# gpu/test_moe_kernels, dev/moe_permute) and .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-moe-permute/run.sh   -> $OUT/kernels.txt, $OUT/heldout-2gpu.tar, summary
set -u
. scripts/device_env.sh
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
{ build/gpu/test_moe_kernels; build/dev/moe_permute; } > "$OUT/kernels.txt" 2>&1
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
SEXTANT_MOE_ROUTE=random LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z RUNS='^1gpu$' MODEL=olmoe-4l OUT=$OUT/olmoe bash scripts/run_heldout_2gpu.sh \
    > /dev/null 2>&1
SEXTANT_MOE_ROUTE=random LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z RUNS='^1gpu$' MODEL=mixtral-2l OUT=$OUT/mixtral bash scripts/run_heldout_2gpu.sh \
    > /dev/null 2>&1
