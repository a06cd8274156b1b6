#!/bin/sh
# docs/validation/2026-11-27-moe-weighted-swiglu/moe20.sh [SEXTANT]: the MoE held-out set's 20 two-GPU layouts and two
# one-GPU steps with each layout's latest measurement on 2 x H200, priced by fit-power's "before" column (the shipped
# H200 overlay as given): OLMoE's eleven and Mixtral's one GPU, EP 2, EP 2 + ZeRO-3 and CP 2 x EP 2 of this report
# (the experts weighing their rows by the gates, tests/data/2026-11-27-moe-weighted-swiglu); Mixtral's ZeRO-1/2/3 and
# TP 2 + SP of 2026-11-27-h200-moe-experts/after and its PP 2, CP 2 and ZeRO-3 with recomputation of the zero-overhead
# re-run (both before this change: the combine kept the experts' outputs).  Per run: measured, priced, error, then
# the peak memory measured, priced, error; then fit-power's summary lines.  KEEP=DIR keeps fit-power's output there;
# MOE_RUNS=A.csv,B.csv,... prices those runs instead (docs/validation/2026-11-27-expert-rows-load/moe22.sh).
set -eu
S=${1:-build/sextant}
A=tests/data/2026-11-27-moe-weighted-swiglu
B=docs/validation/2026-11-27-h200-moe-experts/after
C=tests/data/2026-11-27-h200x2-zero-overhead/rerun
RUNS="$A/olmoe-4l/1gpu.csv"
for x in dp2z1 dp2z2 dp2z3 dp2z3rc ep2 ep2z3 pp2 cp2 cp2ep2 tp2sp; do RUNS="$RUNS,$A/olmoe-4l/$x.csv"; done
for x in 1gpu ep2 ep2z3 cp2ep2; do RUNS="$RUNS,$A/mixtral-2l/$x.csv"; done
for x in dp2z1 dp2z2 dp2z3 tp2sp; do RUNS="$RUNS,$B/$x.csv"; done
for x in pp2 cp2 dp2z3rc; do RUNS="$RUNS,$C/mixtral_$x.csv"; done
RUNS=${MOE_RUNS:-$RUNS}
T=${KEEP:-$(mktemp -d)}
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
mkdir -p "$T"
"$S" fit-power --gpu h200 --calibration hwdb/measured/h200.csv --models docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv \
   --out "$T/o.csv" --runs "$RUNS" > "$T/fit.txt"
echo "$RUNS" | tr , '\n' | sed 's|.*/\([a-z0-9-]*\)/\([a-z0-9_]*\)\.csv|\1/\2|' > "$T/names"
grep -E '^[^ ]+\.csv ' "$T/fit.txt" | paste -d' ' "$T/names" - |
    awk '{printf "%-22s %10s %10s %7s   %8s %8s %7s\n", $1, $3, $4, $5, $11, $12, $13}'
grep -E '^(before|peak memory)' "$T/fit.txt"
