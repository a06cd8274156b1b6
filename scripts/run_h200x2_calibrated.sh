#!/usr/bin/env bash
# An H200's measured overlay, then the two-GPU layouts predicted with it (issue 24: the error on two GPUs
# with the GPU calibrated, ZeRO-2/3, CP 2 and EP 2 among them), on one 2 x H200 machine in two calls:
#   PHASE=calibrate   calibrate on GPU 0 (microbenchmarks, power, the six GPT-2 step-fit runs kept in
#                     steps/), then calibrate --comm over both GPUs; the overlay is the two files joined
#                     ($OUT/h200cal.tar: one.csv, comm.csv, h200.csv and every log)
#   PHASE=uneven      the even and the uneven PP 2 runs again (after the planner's view of the run took the split)
#   PHASE=cp          CP 2 after the backward's K, V exchange moved beside the attention (BEFORE: an earlier
#                     sextant-gpu, timed beside it): losses against one GPU, then the timed runs
#   PHASE=four        four GPUs with the shipped overlay of the card that came (below)
#   PHASE=four_comm   the four GPUs' collectives measured, TP 4 and TP 2 x PP 2 priced with them
#   PHASE=unseen      two-GPU layouts of LLaMA 3.2 3B and GPT-2 large, models no calibration timed
#   PHASE=cpep        CP 2 and EP 2 with the shipped overlay of the card that came, one GPU beside each,
#                     every step's loss kept (R/loss_*.txt) for the loss-trend check
#   PHASE=host        the layouts the planner misses most (CP 2, EP 2, ZeRO-3, TP 2 + SP) and one GPU beside
#                     them, each twice: as run, and with the GPU held 100 ms before each step
#                     (SEXTANT_HOST_AHEAD_US) so that the host's issue of the step is off the GPU's path
#   PHASE=timed       every layout below through `sextant validate --calibration CAL` (CAL: the overlay,
#                     hwdb/measured/h200.csv once committed), one GPU beside each family ($OUT/h200timed.tar)
# Binaries are built here and carried with .deps/lib (GSL, libcsv, cJSON).  Summary lines in $OUT/summary.txt.
set -u
. "$(dirname "$0")/device_env.sh"
PHASE=${PHASE:-calibrate}
GPU=h200
G=./build/sextant-gpu
B=./build/sextant
# card_begin NAME: device_begin NAME on the card that came, priced with its shipped overlay (GPU, CAL), its clocks sampled
card_begin() {
  device_begin "$1"
  GPU=$(card_row)
  CAL=hwdb/measured/$GPU.csv
  say "cards: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' '); overlay $CAL"
  device_sample "$R/smi.csv"
}
# card_end: the clock sampling stopped, R kept, the summary printed; the phase's last line (it exits)
card_end() {
  kill $SMI_PID 2>/dev/null
  keep
  cat "$S"
  exit 0
}
# timed PREFIX NAME:ARGS...: `sextant validate ARGS --calibration $CAL` for each, its CSV and JSON R/PREFIX_NAME.*,
# its step, memory and predicted-step lines in S
timed() {
  local prefix=$1 spec name args
  shift
  for spec in "$@"; do
    name=${spec%%:*}; args=${spec#*:}
    run "${prefix}_$name" 150 $B validate $args --timeout 60 --calibration "$CAL" --csv "$R/${prefix}_$name.csv" \
      --json "$R/${prefix}_$name.json"
    grep -E "^step time|^memory:|^predicted step" "$R/${prefix}_$name.log" | cut -c1-200 | sed "s/^/  $name: /" >> "$S"
  done
}
# PHASE=four: four GPUs (nvidia-h100-x4 or -h200-x4) with the shipped overlay of whichever card came, as a user
# of a 4- or 8-GPU node would run it (its collectives measured on two); losses of two layouts against one GPU
if [ "$PHASE" = four ]; then
  card_begin four
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 12"
  L4="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
  D="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12"
  timed t4 "llama_1gpu:$L" "llama_tp2pp2:$L --tp 2 --pp 2" "llama_tp2spdp2:$L --tp 2 --sp --dp 2" \
             "llama_pp2dp2z1:$L --pp 2 --dp 2 --zero 1" "llama_tp4sp:$L --tp 4 --sp" "llama_pp4:$L --pp 4" \
             "llama_dp4z1:$L --dp 4 --zero 1" "llama_dp4z3:$L --dp 4 --zero 3" "llama_pp4vpp2:$L --pp 4 --vpp 2" \
             "llama4k_cp2dp2:$L4 --cp 2 --dp 2" \
             "gpt2m_1gpu:$D" "gpt2m_tp2pp2:$D --tp 2 --pp 2" "gpt2m_pp2dp2:$D --pp 2 --dp 2" "gpt2m_dp4z2:$D --dp 4 --zero 2" \
             "gpt2m_pp4_uneven:$D --pp 4 --first-stage-layers 5 --last-stage-layers 5"
  equiv llama "llama3.2-1b --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step" \
    "tp2pp2:--tp 2 --pp 2" "dp4z3:--dp 4 --zero 3" "tp2spdp2:--tp 2 --sp --dp 2"
  card_end
fi

# PHASE=four_comm: calibrate --comm over the four GPUs, then TP 4 and TP 2 x PP 2 again with the shipped overlay's
# collectives replaced by the four-rank ones (the shipped ones were measured over two)
if [ "$PHASE" = four_comm ]; then
  device_begin fourcomm
  GPU=$(card_row)
  run comm4 200 $G calibrate --comm --gpus 4 --gpu $GPU --max-bytes 256M --out "$R/comm4.csv"
  grep -E "^# collectives' power: median|^# median" "$R/comm4.log" >> "$S"
  { grep -v -E ",(intra_|nccl_|collective_power|overlap_)" hwdb/measured/$GPU.csv; tail -n +2 "$R/comm4.csv"; } > "$R/$GPU-x4.csv"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 12"
  CAL="$R/$GPU-x4.csv"
  timed t4c "llama_tp4sp:$L --tp 4 --sp" "llama_tp2pp2:$L --tp 2 --pp 2"
  keep
  cat "$S"
  exit 0
fi

# PHASE=unseen: two-GPU layouts of two models no calibration timed (LLaMA 3.2 3B: heads of size 128, GQA 3:1;
# GPT-2 large: width 1280, 36 layers) with the shipped overlay of the card that came, one GPU beside each
if [ "$PHASE" = unseen ]; then
  card_begin unseen
  L="llama3.2-3b --gpu $GPU --seq 2048 --mbs 1 --gbs 8 --steps 12"
  G2="gpt2-large --gpu $GPU --seq 1024 --mbs 4 --gbs 32 --steps 12"
  timed t "llama3b_1gpu:$L" "llama3b_tp2sp:$L --tp 2 --sp" "llama3b_tp2:$L --tp 2" "llama3b_pp2:$L --pp 2" \
            "llama3b_dp2z1:$L --dp 2 --zero 1" "gpt2l_1gpu:$G2" "gpt2l_tp2:$G2 --tp 2" "gpt2l_pp2:$G2 --pp 2" \
            "gpt2l_dp2z1:$G2 --dp 2 --zero 1" "gpt2l_dp2z3:$G2 --dp 2 --zero 3"
  card_end
fi

# PHASE=cpep: CP 2 (GPT-2 at 1024 tokens, LLaMA 3.2 1B at 4096 and 8192) and the MoE test model (one GPU, DP 2,
# DP 2 x EP 2) as 2026-11-26-h200x2-cp and -ep ran them, on the card that came with its shipped overlay; and GPT-2
# large's 12 steps of PHASE=unseen again, every step's loss kept this time
if [ "$PHASE" = cpep ]; then
  card_begin cpep
  C1="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 20 --attention flash"
  C4="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
  C8="llama3.2-1b --gpu $GPU --seq 8192 --mbs 1 --gbs 4 --steps 12 --attention flash"
  E="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3"
  G2="gpt2-large --gpu $GPU --seq 1024 --mbs 4 --gbs 32 --steps 12"
  timed t "gpt2_1gpu:$C1" "gpt2_cp2:$C1 --cp 2" "llama4k_1gpu:$C4" "llama4k_cp2:$C4 --cp 2" \
          "llama8k_1gpu:$C8" "llama8k_cp2:$C8 --cp 2" \
          "moe_1gpu:$E --losses $R/loss_moe_1gpu.txt" "moe_dp2:$E --dp 2 --losses $R/loss_moe_dp2.txt" \
          "moe_dp2ep2:$E --dp 2 --ep 2 --losses $R/loss_moe_dp2ep2.txt" \
          "gpt2l_1gpu:$G2 --losses $R/loss_gpt2l_1gpu.txt" "gpt2l_tp2:$G2 --tp 2 --losses $R/loss_gpt2l_tp2.txt"
  card_end
fi

# PHASE=host: what the host's issue of a step costs the GPU (validator/train.c, SEXTANT_HOST_AHEAD_US)
if [ "$PHASE" = host ]; then
  card_begin host
  C1="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 20 --attention flash"
  C4="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
  E="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 30 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3"
  L="llama3.2-3b --gpu $GPU --seq 2048 --mbs 1 --gbs 8 --steps 12"
  for prefix in p a; do
    if [ $prefix = a ]; then export SEXTANT_HOST_AHEAD_US=100000; fi
    timed $prefix "gpt2_1gpu:$C1" "gpt2_cp2:$C1 --cp 2" "llama4k_cp2:$C4 --cp 2" "moe_1gpu:$E" "moe_dp2ep2:$E --dp 2 --ep 2" \
          "llama3b_tp2sp:$L --tp 2 --sp" "llama3b_dp2z1:$L --dp 2 --zero 1" "llama3b_dp2z3:$L --dp 2 --zero 3"
    grep -h "^host:" "$R"/${prefix}_*.log | sed "s/^/  $prefix: /" >> "$S"
  done
  unset SEXTANT_HOST_AHEAD_US
  card_end
fi

# the overlay is an H200's: on any other card, nothing is run
if ! nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200; then
  echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); nothing run"; exit 3
fi

if [ "$PHASE" = calibrate ]; then
  device_begin h200cal
  device_sample "$R/smi.csv"
  run calibrate 420 $G calibrate --gpu $GPU --out "$R/one.csv" --step-runs "$R/steps"
  grep -E "efficiency|launch|fit|power|clock" "$R/calibrate.log" | head -40 >> "$S"
  run comm 150 $G calibrate --comm --gpus 2 --gpu $GPU --max-bytes 1G --out "$R/comm.csv"
  grep -E "bandwidth|latency|power|slowdown" "$R/comm.log" | head -20 >> "$S"
  { cat "$R/one.csv"; tail -n +2 "$R/comm.csv"; } > "$R/h200.csv"
  card_end
fi

CAL=${CAL:-hwdb/measured/h200.csv}
if [ "$PHASE" = uneven ]; then
  device_begin h200uneven
  D="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12"
  timed t "gpt2m_pp2:$D --pp 2" "gpt2m_pp2_uneven:$D --pp 2 --first-stage-layers 11" \
          "gpt2m_pp2_uneven13:$D --pp 2 --first-stage-layers 13"
  keep
  cat "$S"
  exit 0
fi
if [ "$PHASE" = cp ]; then
  device_begin h200cp
  for model in gpt2 llama3.2-1b; do
    equiv "$model" "$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step --attention flash --timeout 60" \
      "cp2:--cp 2" "cp2rc:--cp 2 --recompute full"
  done
  C="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 12 --attention flash"
  C4="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
  for spec in "gpt2_cp2:$C --cp 2" "llama4k_cp2:$C4 --cp 2"; do
    name=${spec%%:*}; args=${spec#*:}
    for bin in ${BEFORE:+$BEFORE} $G; do
      tag=after; [ "$bin" = "${BEFORE:-}" ] && tag=before
      run "t_${name}_$tag" 150 $bin train $args --timeout 60 --calibration "$CAL" --csv "$R/t_${name}_$tag.csv"
      grep -E "^step time" "$R/t_${name}_$tag.log" | cut -c1-160 | sed "s/^/  $name $tag: /" >> "$S"
    done
  done
  keep
  cat "$S"
  exit 0
fi
device_begin h200timed
device_sample "$R/smi.csv"
M="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12"
L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 12"
C="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 12 --attention flash"
C4="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --attention flash"
E="moe-test --gpu $GPU --seq 1024 --mbs 4 --gbs 16 --steps 20 --warmup 5 --attention flash --lr 1e-3 --lr-warmup 3"
D="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 64 --steps 12"
timed t "gpt2_1gpu:$M" "gpt2_dp2z1:$M --dp 2 --zero 1" "gpt2_dp2z2:$M --dp 2 --zero 2" "gpt2_dp2z3:$M --dp 2 --zero 3" \
        "llama_1gpu:$L" "llama_dp2z1:$L --dp 2 --zero 1" "llama_dp2z2:$L --dp 2 --zero 2" "llama_dp2z3:$L --dp 2 --zero 3" \
        "llama_tp2sp:$L --tp 2 --sp" "llama_pp2:$L --pp 2" \
        "gpt2m_1gpu:$D" "gpt2m_tp2:$D --tp 2" "gpt2m_pp2:$D --pp 2" "gpt2m_pp2_uneven:$D --pp 2 --first-stage-layers 11" \
        "cp_gpt2_1gpu:$C" "cp_gpt2_cp2:$C --cp 2" "cp_llama4k_1gpu:$C4" "cp_llama4k_cp2:$C4 --cp 2" \
        "moe_1gpu:$E" "moe_dp2:$E --dp 2" "moe_ep2:$E --dp 2 --ep 2"
# the uneven split trains as the even one does: its losses against the even split's, step by step
run eq_pp2_even 120 $G train gpt2-medium --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step --pp 2 \
  --losses "$R/eq_pp2_even.txt"
run eq_pp2_uneven 120 $G train gpt2-medium --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step --pp 2 \
  --first-stage-layers 11 --losses "$R/eq_pp2_uneven.txt"
[ -s "$R/eq_pp2_even.txt" ] && [ -s "$R/eq_pp2_uneven.txt" ] && say "  $(compare "$R/eq_pp2_even.txt" "$R/eq_pp2_uneven.txt")  pp2 uneven vs even"
kill $SMI_PID 2>/dev/null
bash scripts/smi_summary.sh /dev/null "$R/smi.csv" > "$R/clocks.txt" 2>/dev/null
keep
cat "$S"
