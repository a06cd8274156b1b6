#!/bin/sh
# docs/validation/2026-11-27-expert-rows-load/moe22.sh [SEXTANT]: the MoE held-out set's 20 two-GPU layouts and two
# one-GPU steps with each layout's latest measurement on 2 x H200, priced by fit-power's "before" column (the shipped
# H200 overlay as given): OLMoE's eleven and Mixtral's one GPU, EP 2, EP 2 + ZeRO-3 and CP 2 x EP 2 of
# 2026-11-27-moe-weighted-swiglu; Mixtral's ZeRO-1/2/3, TP 2 + SP, PP 2, CP 2 and ZeRO-3 with recomputation measured
# again here with the same validator (tests/data/2026-11-27-expert-rows-load/mixtral-2l).  Per run: measured,
# priced, error, then the peak memory measured, priced, error; then fit-power's summary lines (moe20.sh's table).
set -eu
S=${1:-build/sextant}
A=tests/data/2026-11-27-moe-weighted-swiglu
B=tests/data/2026-11-27-expert-rows-load/mixtral-2l
RUNS="$A/olmoe-4l/1gpu.csv"
for x in dp2z1 dp2z2 dp2z3 dp2z3rc ep2 ep2z3 pp2 cp2 cp2ep2 tp2sp; do RUNS="$RUNS,$A/olmoe-4l/$x.csv"; done
for x in 1gpu ep2 ep2z3 cp2ep2; do RUNS="$RUNS,$A/mixtral-2l/$x.csv"; done
for x in dp2z1 dp2z2 dp2z3 tp2sp pp2 cp2 dp2z3rc; do RUNS="$RUNS,$B/$x.csv"; done
MOE_RUNS=$RUNS exec sh docs/validation/2026-11-27-moe-weighted-swiglu/moe20.sh "$S"
