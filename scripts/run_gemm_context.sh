#!/usr/bin/env bash
# Calibrate's GEMM timing against every other timing of the same GEMMs, one difference at a time on one card
# (docs/validation/2026-11-27-h100-calibrate-operands).  First (`poll`, the default): does reading NVML slow the GPU
# it reads?  Calibrate times its GEMMs with no sampler beside them; every other
# timing of the same GEMMs (clock_phases, polling the SM clock every 1 ms) and every training step (the validator's
# power window, 1 ms until b173be4, 10 ms since) ran with one, and ran the large GEMMs 7-17% slower
# (docs/validation/2026-11-27-h100h200-gemm-sustained).  On one card, back to back:
#   clock_phases --tn --workspace-mib 32 (the step's handle) with the clock polled every 1 ms, 10 ms and never, and
#   with cuBLAS's default workspace at 1 ms (the earlier runs' set-up); then training steps of three models with
#   the step's sampler at its 10 ms, at 1 ms and off (SEXTANT_POWER_POLL_MS).
# With `data` as its argument: clock_phases (the step's handle, 10 ms polls) on normal operands, on uniform ones, and
# on operands as calibrate's scratch holds them (one 16 MiB block repeated, A and B alike), twice in turn; then
# calibrate's own timing of LLaMA-3 70B's GEMMs on the same card.
# With `kernels`: the same two timings of 8192^3 under cuBLASLt's trace (CUBLASLT_LOG_LEVEL=2), which names the
# kernel each call ran.
# With `state`: calibrate's way of timing (--cool-first) on the fresh card, then again once the card is hot.
# With `context`: that timing with clock_phases' handle on a non-blocking stream, its operands in 4 GiB allocations,
# both, and neither.
# With `fixed`: clock_phases on NaN operands (what calibrate's shapes read before scratch_refresh), then calibrate
# with scratch_refresh on its default models, its table to set beside the shipped overlay's.
#   OUT=DIR bash scripts/run_gemm_context.sh [poll|data|kernels|state|context|fixed]
#   (BIN_DIR: sextant-gpu and dev/clock_phases; default build)
#   -> $OUT/summary.txt, $OUT/gemm-context-PHASE.tar
set -u
PHASE=${1:-poll}
. "$(dirname "$0")/device_env.sh"
B=${BIN_DIR:-build}
GPU=${GPU:-$(card_row)}
W=/tmp/np
private_root "$W" docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv "$B/sextant-gpu"
device_begin "gemm-context-$PHASE"
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt")"
SHAPES="28672x1024x4096 4096x4096x4096"
cp_summary() {   # the 8192^3 rows: pattern, NVML MHz, us
    say "  $(grep -E '^8192x8192x8192,(alternate_2ms|gemm_only|cool_5ms),.*gemm' "$R/cp_$1.log" | cut -d, -f2,7,10 | tr '\n' ' ')"
}
if [ "$PHASE" = fixed ]; then
    # NaN operands (what calibrate's GEMMs read before scratch_refresh), then calibrate with the refresh, the shipped
    # overlay's models, to set its table beside the shipped one
    run cp_nan 120 "$B/dev/clock_phases" --tn --cool-first --data nan --workspace-mib 32 --poll-ms 10 0.5 $SHAPES
    say "  nan: $(grep -E '^8192x8192x8192,cool_first' "$R/cp_nan.log")"
    cp_summary nan
    run calibrate 450 "$W/build/sextant-gpu" calibrate --gpu "$GPU" --no-step-fit --out "$R/calibrate.csv"
    say "  calibrate: $(grep -c "^$GPU,gemm_us" "$R/calibrate.csv" 2>/dev/null) GEMM rows"
    keep
    exit 0
fi
if [ "$PHASE" = context ]; then
    # calibrate's process against clock_phases': the stream kind and where the operands lie, in turn
    for c in "legacy:" "stream:--stream" "bigalloc:--big-alloc" "stream_bigalloc:--stream --big-alloc" "legacy_again:"; do
        name=${c%%:*}
        run "cp_$name" 120 "$B/dev/clock_phases" --tn --cool-first ${c#*:} --workspace-mib 32 --poll-ms 10 0.5 $SHAPES
        say "  $name: $(grep -E '^8192x8192x8192,cool_first' "$R/cp_$name.log")"
        cp_summary "$name"
    done
    keep
    exit 0
fi
if [ "$PHASE" = state ]; then
    # calibrate's timing before any other work on the card, then after clock_phases' sustained patterns
    device_sample "$R/smi.csv"
    run cp_fresh 120 "$B/dev/clock_phases" --tn --cool-first --workspace-mib 32 --poll-ms 10 2 $SHAPES
    say "  $(grep -E '^8192x8192x8192,cool_first' "$R/cp_fresh.log")"
    cp_summary fresh
    run cp_hot 120 "$B/dev/clock_phases" --tn --cool-first --workspace-mib 32 --poll-ms 10 0.5 $SHAPES
    say "  $(grep -E '^8192x8192x8192,cool_first' "$R/cp_hot.log")"
    cp_summary hot
    kill "$SMI_PID"
    keep
    exit 0
fi
if [ "$PHASE" = kernels ]; then
    # which kernel cuBLAS runs for 8192^3 in each program: cuBLASLt's trace of every call (level 2)
    CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$R/lt_clock_phases.log" \
        run cp_traced 120 "$B/dev/clock_phases" --tn --workspace-mib 32 --poll-ms 0 0.5
    cp_summary traced
    CUBLASLT_LOG_LEVEL=2 CUBLASLT_LOG_FILE="$R/lt_calibrate.log" run calibrate 330 "$W/build/sextant-gpu" calibrate \
        --gpu "$GPU" --no-step-fit --gemm-models llama3-70b --out "$R/calibrate.csv"
    say "  calibrate: $(grep -E '^llama3-70b +attn_out +8192 ' "$R/calibrate.log")"
    gzip -f "$R"/lt_*.log
    keep
    exit 0
fi
if [ "$PHASE" = data ]; then
    for d in normal calibrate uniform normal calibrate; do
        name=data_$d
        [ -e "$R/cp_$name.log" ] && name=${name}_again
        run "cp_$name" 120 "$B/dev/clock_phases" --tn --workspace-mib 32 --poll-ms 10 --data "$d" 2 $SHAPES
        cp_summary "$name"
    done
    run calibrate 330 "$W/build/sextant-gpu" calibrate --gpu "$GPU" --no-step-fit --gemm-models llama3-70b \
        --out "$R/calibrate.csv"
    say "  calibrate: $(grep -E '^llama3-70b +attn_out +8192 ' "$R/calibrate.log")"
    keep
    exit 0
fi
for c in "ws32_poll1:--workspace-mib 32 --poll-ms 1" "ws32_poll0:--workspace-mib 32 --poll-ms 0" \
         "ws32_poll10:--workspace-mib 32 --poll-ms 10" "wsdefault_poll1:--poll-ms 1" \
         "ws32_poll0_again:--workspace-mib 32 --poll-ms 0"; do
    name=${c%%:*}
    run "cp_$name" 120 "$B/dev/clock_phases" --tn ${c#*:} 2 $SHAPES
    cp_summary "$name"
done
for c in "llama3-70b-1l 2 4096 sextant 10" "llama3-70b-1l 2 4096 sextant 0" "llama3-70b-1l 2 4096 sextant 1" \
         "gpt2 16 1024 unfused 10" "gpt2 16 1024 unfused 0" "llama2-13b-4l 2 2048 unfused 10" \
         "llama2-13b-4l 2 2048 unfused 0" "llama3-70b-1l 2 4096 sextant 0"; do
    set -- $c
    name="$1_mbs$2_seq$3_$4_poll$5"
    [ -e "$R/$name.log" ] && name=${name}_again
    SEXTANT_POWER_POLL_MS=$5 run "$name" 150 "$W/build/sextant-gpu" train "$1" --gpu "$GPU" --mbs "$2" --gbs "$2" \
        --seq "$3" --attention "$4" --steps 20 --warmup 5 --calibration "hwdb/measured/$GPU.csv" --csv "$R/$name.csv"
    say "  $name: $(grep -E '^step +all' "$R/$name.log") | $(grep -E '^power:' "$R/$name.log" | cut -c1-60)"
done
keep
