#!/usr/bin/env bash
# The experts' cuBLASLt algorithms asked before the first step (validator/moe.c, lt_prewarm), against the binary
# that asked each bucket on first sight (OLD, built at the commit before), on the same GPUs in one call, the runs
# interleaved old/new: the MoE steps of docs/validation/2026-11-26-moe-launches at the trainer's default rate
# (moe-test, moe-fine, moe-wide; one GPU and EP 2), each priced as run with the card's shipped overlay.
# The log's "MoE buffers:" line now also gives the pool's bytes in use at its peak beside what it reserved.
# The log's "NCCL (rank 0):" line gives each communicator's memory at its split and the groups' first use: test_dp2
# (the MoE model, DP 2 without EP) and gpt2_dp2 (dense) beside the EP 2 runs say what the EP group adds; test_pp2:
# the MoE model over two pipeline stages; test_rc, test_ep2_rc: with full recomputation (one GPU, EP 2); test_tp2,
# wide_tp2: TP 2 with SP, every expert split over the two ranks; test_cp2, test_cp2_ep2: CP 2 (the ring), EP 1 and 2.
# NAMES: the runs to make (default: the six MoE steps); WHICH: the binaries (default: old new).  Run from the
# repository root with build/ and OLD carried:
#   OUT=DIR OLD=.carry/old/sextant-gpu bash scripts/run_moe_prewarm.sh
#   OUT=DIR OLD=.carry/old/sextant-gpu WHICH=new NAMES="test_ep2 fine_ep2 test_dp2 gpt2_dp2" bash scripts/run_moe_prewarm.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start moe-prewarm
: "${OLD:?OLD must name the binary built before the change}"
ZOO=docs/validation/2026-11-26-moe-launches/zoo_moe_heldout.csv
private_root /tmp/moe-new "$ZOO" build/sextant-gpu
private_root /tmp/moe-old "$ZOO" "$OLD"
device_sample "$R/smi.csv"
C="--gpu $GPU --seq 1024 --steps 30 --warmup 5 --attention flash --calibration $CAL"
NAMES=${NAMES:-fine_ep2 wide_ep2 test_ep2 fine_mbs4 test_mbs4 wide_mbs4}
for spec in fine_ep2:moe-fine:4:2 wide_ep2:moe-wide:4:2 test_ep2:moe-test:4:2 fine_mbs4:moe-fine:4:1 \
  test_mbs4:moe-test:4:1 wide_mbs4:moe-wide:4:1 test_dp2:moe-test:4:dp gpt2_dp2:gpt2:4:dp test_pp2:moe-test:4:pp \
  test_rc:moe-test:4:rc test_ep2_rc:moe-test:4:ep2rc test_tp2:moe-test:4:tp wide_tp2:moe-wide:4:tp \
  test_cp2:moe-test:4:cp test_cp2_ep2:moe-test:4:cpep; do
  IFS=: read -r name model mbs ep <<< "$spec"
  case " $NAMES " in *" $name "*) ;; *) continue;; esac
  par=""; [ "$ep" = 2 ] && par="--dp 2 --ep 2"; [ "$ep" = dp ] && par="--dp 2"; [ "$ep" = pp ] && par="--pp 2"
  [ "$ep" = rc ] && par="--recompute full"; [ "$ep" = ep2rc ] && par="--dp 2 --ep 2 --recompute full"
  [ "$ep" = tp ] && par="--tp 2 --sp"; [ "$ep" = cp ] && par="--cp 2"; [ "$ep" = cpep ] && par="--cp 2 --ep 2"
  for which in ${WHICH:-old new}; do
    run ${which}_$name 150 /tmp/moe-$which/build/sextant-gpu train $model $C --mbs $mbs --gbs $((4 * mbs)) $par \
      --csv "$R/${which}_$name.csv"
    grep -E "^step time|^memory|^MoE buffers|^host|^NCCL|^our alloc" "$R/${which}_$name.log" | sed "s/^/  ${which}_$name: /" >> "$S"
  done
done
kill $SMI_PID 2>/dev/null; keep; cat "$S"
