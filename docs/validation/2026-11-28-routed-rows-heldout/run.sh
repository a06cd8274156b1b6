#!/usr/bin/env bash
# Held-out check of the routed rows' tiles (docs/model.md, "Mixture of experts", a router's rows; 52cf8bf): Mixtral
# 8x7B cut to 2 layers on one GPU at rows an expert the change was not derived on (256, 768 and 2048: 1024, 3072 and
# 2 x 4096 tokens a micro-batch), OLMoE cut to 4 layers at 1024 tokens (128 rows an expert), each priced by the
# validator built with the change, before it ran.  From the repository root with build/sextant-gpu and .deps/lib:
#   OUT=DIR bash docs/validation/2026-11-28-routed-rows-heldout/run.sh      -> $OUT/summary.txt, $OUT/heldout.tar
set -u
. scripts/device_env.sh
device_start heldout
P=${TMPDIR:-/tmp}/heldout-root
private_root "$P" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv build/sextant-gpu
G=$P/build/sextant-gpu
C="--gpu $GPU --attention flash --steps 12 --warmup 4"
device_sample "$R/smi.csv"
for spec in "mixtral_s1k:mixtral-2l --seq 1024 --mbs 1 --gbs 32" "mixtral_s3k:mixtral-2l --seq 3072 --mbs 1 --gbs 12" \
            "mixtral_mbs2:mixtral-2l --seq 4096 --mbs 2 --gbs 8" "olmoe_s1k:olmoe-4l --seq 1024 --mbs 1 --gbs 32"; do
    name=${spec%%:*} args=${spec#*:}
    [ -n "${RUNS:-}" ] && ! [[ $name =~ $RUNS ]] && continue
    run "$name" 150 $G train $args $C --csv "$R/$name.csv"
    grep -E "^step time|^power|^MoE rows" "$R/$name.log" | cut -c1-170 | sed "s/^/  $name: /" >> "$S"
done
kill "$SMI_PID" 2>/dev/null
keep
