#!/bin/sh
# docs/validation/2026-11-28-expert-algos/moe22.sh [SEXTANT]: the MoE held-out set of 2026-11-27-expert-rows-load/
# moe22.sh (OLMoE cut to 4 layers and Mixtral 8x7B cut to 2, one GPU and ten two-GPU layouts each, 2 x H200),
# measured again with the validator whose expert GEMMs take their 16-row bucket's algorithm asked at its top
# (tests/data/2026-11-28-expert-algos), priced as moe22.sh prices them: per run measured, priced, error, then the
# peak memory measured, priced, error; then fit-power's summary lines.
set -eu
D=tests/data/2026-11-28-expert-algos
RUNS=""
for m in olmoe-4l mixtral-2l; do
    for x in 1gpu dp2z1 dp2z2 dp2z3 dp2z3rc ep2 ep2z3 pp2 cp2 cp2ep2 tp2sp; do RUNS="$RUNS${RUNS:+,}$D/$m/$x.csv"; done
done
MOE_RUNS=$RUNS exec sh docs/validation/2026-11-27-moe-weighted-swiglu/moe20.sh "${1:-build/sextant}"
