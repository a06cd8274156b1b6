#!/usr/bin/env bash
# validate's "MoE priced at this host's issue" line (the planner again at the forward's measured issue of an expert
# GEMM) on the MoE held-out layouts the host issues most: OLMoE at one GPU, TP 2 + SP and PP 2, Mixtral at EP 2,
# with the random route.  From the repository root with build/sextant-gpu and .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-cpu-bind/host_line.sh   -> $OUT/{olmoe,mixtral}/ (summary, tar), host.txt
set -u
. scripts/device_env.sh
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
Z=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv
export SEXTANT_MOE_ROUTE=random
LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=olmoe-4l RUNS='^(1gpu|tp2sp|pp2)$' OUT=$OUT/olmoe \
    bash scripts/run_heldout_2gpu.sh > /dev/null 2>&1
LAYOUTS=moe STEPS=20 WARMUP=5 ZOO=$Z MODEL=mixtral-2l RUNS='^ep2$' OUT=$OUT/mixtral bash scripts/run_heldout_2gpu.sh \
    > /dev/null 2>&1
for m in olmoe mixtral; do
  mkdir -p "$OUT/x" && tar -C "$OUT/x" -xf "$OUT/$m/heldout-2gpu.tar"
  for f in "$OUT"/x/heldout-2gpu/*.log; do
    echo "$m $(basename "$f" .log): $(grep -h '^step time' "$f" | cut -c1-110) | $(grep -h "^MoE priced at this host" "$f")"
  done
  rm -rf "$OUT/x"
done | tee "$OUT/host.txt"
