#!/bin/bash
# The MoE held-out set at random with the routed rows in two pools (kept, scratch), then the MoE layouts' loss
# equivalence.  From the repository root with build/sextant-gpu (and .deps/lib) in place:
#   OUT=DIR bash docs/validation/2026-11-28-moe-pools/run.sh olmoe-4l
#   OUT=DIR EQUIV=moe-test bash docs/validation/2026-11-28-moe-pools/run.sh mixtral-2l
# (the calls of 2026-11-28 unpacked the carried binaries first: tar xJf .carry/pack18/bins.tar.xz)
set -u
export LD_LIBRARY_PATH=$PWD/.deps/lib:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
M=$1
mkdir -p $OUT/r
env SEXTANT_MOE_ROUTE=random LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv \
  MODEL=$M ${RUNS:+RUNS=$RUNS} OUT=$OUT/r/$M bash scripts/run_heldout_2gpu.sh > $OUT/r/$M.out 2>&1
if [ -n "${EQUIV:-}" ]; then
  ONLY="$EQUIV" timeout 200 bash tests/gpu/parallel_equivalence.sh > $OUT/r/equiv.txt 2>&1
  echo "rc=$?" >> $OUT/r/equiv.txt
fi
cd $OUT && tar czf r.tgz r && rm -rf r
