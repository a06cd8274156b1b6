#!/usr/bin/env bash
# CP 2's K/V exchange on a high-priority stream (SEXTANT_CP_STREAM_PRIORITY=1) against the default priority:
# `sextant validate` of gpt2 (seq 1024) and llama3.2-1b (seq 4096) with --cp 2, each way, and on one GPU, with the
# shipped H100 overlay (docs/validation/2026-11-26-h200x2-cp named the slow exchange as CP's miss).
#   OUT=DIR bash scripts/run_cp_priority.sh   -> $OUT/summary.txt, $OUT/cp-priority.tar
set -u
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-.carry/lead}
device_begin cp-priority
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
M="gpt2 --gpu h100-sxm --seq 1024 --mbs 8 --gbs 32 --steps 12 --attention flash"
L="llama3.2-1b --gpu h100-sxm --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
for spec in "gpt2_1gpu:0:$M" "gpt2_cp2:0:$M --cp 2" "gpt2_cp2_prio:1:$M --cp 2" \
            "llama_1gpu:0:$L" "llama_cp2:0:$L --cp 2" "llama_cp2_prio:1:$L --cp 2"; do
    name=${spec%%:*}; rest=${spec#*:}; prio=${rest%%:*}; args=${rest#*:}
    SEXTANT_CP_STREAM_PRIORITY=$prio run "$name" 150 "$B/sextant" validate $args --timeout 60 \
        --calibration hwdb/measured/h100-sxm.csv --csv "$R/$name.csv" --json "$R/$name.json"
    say "  $(grep -E '^step +all' "$R/$name.log" | head -1) | $(grep -E '^tokens/s' "$R/$name.log" | head -1 | cut -c1-80)"
done
keep
