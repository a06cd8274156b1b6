#!/usr/bin/env bash
# The router's kernels and the exchange's chunk copy after 2026-11-28's rewrite (kernels/moe.cu: a warp a token for
# the top-k and the router's backward, a block row a chunk for the copy), on two GPUs: the kernels' test and their
# dev program (both versions, checks and benchmark), the equivalence of the 64-expert test model over TP 2 + SP and
# EP 2 with one GPU, then the MoE held-out layouts that run them most (OLMoE: 64 experts, top 8) with the random
# route and the router, and two Mixtral layouts.  Run from the repository root with build/ (sextant-gpu,
# gpu/test_moe_kernels, dev/moe_router) and .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-moe-router-kernels/run.sh
#   -> $OUT/kernels.txt, $OUT/olmoe-random/, $OUT/olmoe-router/, $OUT/mixtral-random/ (summary.txt, heldout-2gpu.tar)
set -u
. scripts/device_env.sh
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv; date -u +%FT%TZ
  build/gpu/test_moe_kernels; build/dev/moe_router
  ONLY='^moe-test(-64)? (tp2\+sp|dp2\+ep2)$' tests/gpu/parallel_equivalence.sh build/sextant-gpu; } > "$OUT/kernels.txt" 2>&1
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
H="LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z"
env $H OUT=$OUT/olmoe-random MODEL=olmoe-4l SEXTANT_MOE_ROUTE=random RUNS='^(1gpu|dp2z1|tp2sp|pp2|ep2z3|cp2ep2)$' \
    bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
env $H OUT=$OUT/olmoe-router MODEL=olmoe-4l RUNS='^(tp2sp|dp2z1)$' bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
env $H OUT=$OUT/mixtral-random MODEL=mixtral-2l SEXTANT_MOE_ROUTE=random RUNS='^(tp2sp|cp2ep2)$' \
    bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
