#!/usr/bin/env bash
# Where Mixtral's expert GEMMs lose their 7-12% (docs/validation/2026-11-27-h200-moe-experts): the two held-out MoE
# shapes (Mixtral 8x7B cut to 2 layers, OLMoE cut to 4; docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv)
# on one GPU at that report's shape, one run per case and model, PASSES times in turn.  A case is NAME:VAR=VALUE,...
# (the environment the run takes; none for the default).  The first call's cases (the default): the experts taking
# turns on the 4 streams (Transformer Engine's grouped GEMM's way) against all on 1 (SEXTANT_MOE_STREAMS=1).
#   OUT=DIR [CASES="..."] [MODELS="..."] [PASSES=2] bash scripts/run_moe_lanes.sh   (BIN_DIR: sextant-gpu; default build)
#   -> $OUT/summary.txt, $OUT/moe-lanes.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-build}
GPU=${GPU:-$(card_row)}
W=/tmp/moe-lanes-root
private_root "$W" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv "$B/sextant-gpu"
device_begin moe-lanes
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
CASES=${CASES:-lanes4: lanes1:SEXTANT_MOE_STREAMS=1}
for pass in $(seq 1 "${PASSES:-2}"); do
    for model in ${MODELS:-mixtral-2l olmoe-4l}; do
        for case in $CASES; do
            name=${model}_${case%%:*}_$pass env=${case#*:}
            run "$name" 150 env ${env//,/ } "$W/build/sextant-gpu" train "$model" --gpu "$GPU" --seq 4096 --mbs 1 --gbs 8 \
                --attention flash --steps 20 --warmup 5 --calibration "$W/hwdb/measured/$GPU.csv" --csv "$R/$name.csv"
            say "  $name: $(grep -E '^step +all' "$R/$name.log") | $(grep -E '^power:' "$R/$name.log" | cut -c1-60)"
            say "    $(grep -E '^expert_(up|down) ' "$R/$name.log" | awk '{printf "%s %s/%s %s  ", $1, $3, $4, $5}')"
        done
    done
done
keep
