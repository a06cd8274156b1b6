#!/bin/sh
# docs/validation/2026-11-27-gemm-accumulate/moe20.sh: the MoE held-out set's 20 two-GPU layouts (each layout's latest measurement:
# OLMoE of 2026-11-27-h200x2-heldout-moe, Mixtral of 2026-11-27-h200-moe-experts/after and the zero-overhead re-run) and
# the two one-GPU steps, priced by fit-power's "before" column with the shipped H200 overlay; SEXTANT names the binary.
set -eu
S=${SEXTANT:-build/sextant}
A=tests/data/2026-11-27-h200x2-heldout-moe/run1/olmoe-4l
B=docs/validation/2026-11-27-h200-moe-experts/after
C=tests/data/2026-11-27-h200x2-zero-overhead/rerun
RUNS="$A/1gpu.csv"
for x in dp2z1 dp2z2 dp2z3 dp2z3rc ep2 ep2z3 pp2 cp2 cp2ep2; do RUNS="$RUNS,$A/$x.csv"; done
RUNS="$RUNS,tests/data/2026-11-27-h200x2-heldout-moe/run2/olmoe-4l/tp2sp.csv,$B/1gpu.csv"
for x in dp2z1 dp2z2 dp2z3 ep2 ep2z3 tp2sp; do RUNS="$RUNS,$B/$x.csv"; done
for x in pp2 cp2 cp2ep2 dp2z3rc; do RUNS="$RUNS,$C/mixtral_$x.csv"; done
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$S" fit-power --gpu h200 --calibration hwdb/measured/h200.csv --models docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv \
   --out "$T/o.csv" --runs "$RUNS" > "$T/fit.txt"
echo "$RUNS" | tr , '\n' | sed 's|.*/\([a-z0-9-]*\)/\([a-z0-9_]*\)\.csv|\1/\2|' > "$T/names"
grep -E '^[^ ]+\.csv ' "$T/fit.txt" | awk '{print $2, $3, $4, $9, $10}' | paste -d' ' "$T/names" - | awk '{printf "%-22s %10s %10s %7s\n",$1,$2,$3,$4}'
grep -E '^(before|peak memory)' "$T/fit.txt"
