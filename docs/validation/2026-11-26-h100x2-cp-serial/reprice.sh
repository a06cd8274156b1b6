#!/bin/bash
# The recorded CP 2 steps (and the one-GPU runs beside them) priced by this checkout's planner with the shipped
# overlays: fit-power's "before" column (the overlay as given, nothing refitted). Run from the repository root after
# `make build/sextant`.
set -euo pipefail
S=${SEXTANT:-build/sextant}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
price() {   # gpu, files...
    local gpu=$1; shift
    echo "== $gpu"
    "$S" fit-power --gpu "$gpu" --calibration "hwdb/measured/$gpu.csv" --runs "$(echo "$@" | tr ' ' ',')" --out "$tmp/fit.csv" |
        awk '/^run/{p=1; next} /^clock/{p=0} p{print "  " $1, $2, $3, $4}'
}
for set in h100-sxm:docs/validation/2026-11-26-h100x2-cpep/raw h200:docs/validation/2026-11-26-h200x2-cpep/raw; do
    gpu=${set%%:*}; R=${set#*:}
    price "$gpu" "$R"/t_gpt2_cp2.csv "$R"/t_llama4k_cp2.csv "$R"/t_llama8k_cp2.csv "$R"/t_gpt2_1gpu.csv \
        "$R"/t_llama4k_1gpu.csv "$R"/t_llama8k_1gpu.csv
done
D=docs/validation/2026-11-26-h100x2-cp-serial/raw
price h100-sxm "$D"/gpt2_s0.csv "$D"/llama_s0.csv "$D"/gpt2_s1.csv "$D"/llama_s1.csv
