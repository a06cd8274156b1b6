#!/bin/bash
# fit/build.sh [DIR]: the three H100 overlays this report weighed, rebuilt by scripts/retime_overlay.sh from
# fixed/calibrate.csv and the overlay of 2154b94 (the table timed on NaN operands), from the repository root, into DIR
# (default /tmp/calibrate-operands), each then priced on the held-out sets (fit/heldout.sh):
#   table:            the GEMM rows of gpt2, gpt2-medium and llama3.2-1b (the shipped table's three models) and
#                     calibrate's curve from the fixed run, no power term (POWER_KEYS="");
#   table-and-power:  with the fixed run's P_static, e_GEMM and e_byte;
#   shipped:          with its e_GEMM only (the one power term the NaN operands biased: the GEMM samples ran after
#                     AdamW's; P_static is the spinning thread's, e_byte the copies' and LayerNorm's, all run before
#                     it), hwdb/measured/h100-sxm.csv since.
# Also DIR/h100-sxm-gemm-table.csv, the table the three share (fit/h100-sxm-gemm-table.csv, which tests/test_fit_gemm.c
# refits); fit/NAME-fit-gemm.txt and fit/NAME-fit-power.txt are DIR/NAME/fit-gemm.txt and fit-power.txt.
set -eu
D=${1:-/tmp/calibrate-operands}
R=docs/validation/2026-11-27-h100-calibrate-operands
mkdir -p "$D"
git show 2154b94:hwdb/measured/h100-sxm.csv > "$D/before.csv"
for v in table:"" table-and-power:power_static_w,energy_gemm_pj_per_flop,energy_pj_per_byte shipped:energy_gemm_pj_per_flop; do
    name=${v%%:*}
    echo "== $name"
    BASE="$D/before.csv" POWER_KEYS=${v#*:} KEEP="$D/$name" \
        bash scripts/retime_overlay.sh h100-sxm "$R/fixed/calibrate.csv" "$D/$name.csv" | grep -E '^(clock|held|SM)'
    bash "$R/fit/heldout.sh" "$D/$name.csv"
done
grep -E '^(gpu,key|h100-sxm,gemm_us:|h100-sxm,gemm_efficiency,|h100-sxm,gemm_half_gflop,)' "$D/table/table.csv" \
    > "$D/h100-sxm-gemm-table.csv"
