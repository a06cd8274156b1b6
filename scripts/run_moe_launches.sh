#!/usr/bin/env bash
# Held-out MoE steps for the expert GEMMs priced one launch per expert (docs/validation/2026-11-26-moe-launches):
# shapes no recorded run had, on the 2 GPUs that came, each priced as run with the card's shipped overlay:
#   - the MoE test model at 512 and 2048 rows an expert (mbs 2, mbs 8; the recorded one-GPU runs had 1024);
#   - moe-fine: 32 experts of width 704, top-4 (four times the launches for a token's expert FLOPs), mbs 4 and 8;
#   - moe-wide: width 2048, experts of width 5632 (its GEMMs fill the GPU: the two pricings nearly agree);
#   - EP 2 of moe-fine (16 experts a rank) and of moe-wide.
# The two models are in the report's zoo_moe_heldout.csv, the zoo of a private root (private_root).
# LR=1e-3 (the MoE reports' rate, at which the router sends most rows to a few experts) or the trainer's default
# 1e-4 (LR unset: a calmer spread of rows over the experts).  NAMES: the runs to make (default: all).
# Run from the repository root with build/ carried:  OUT=DIR [LR=1e-3] bash scripts/run_moe_launches.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start moe-launches
W=/tmp/moe-root
private_root "$W" docs/validation/2026-11-26-moe-launches/zoo_moe_heldout.csv build/sextant-gpu
B=$W/build/sextant-gpu
device_sample "$R/smi.csv"
C="--gpu $GPU --seq 1024 --steps 30 --warmup 5 --attention flash --calibration $CAL"
[ -n "${LR:-}" ] && C="$C --lr $LR --lr-warmup 3"
NAMES=${NAMES:-test_mbs2 test_mbs4 test_mbs8 fine_mbs4 fine_mbs8 wide_mbs4 fine_ep2 wide_ep2 test_ep2}
wanted() { case " $NAMES " in *" $1 "*) return 0;; esac; return 1; }
for spec in test_mbs2:moe-test:2 test_mbs4:moe-test:4 test_mbs8:moe-test:8 fine_mbs4:moe-fine:4 fine_mbs8:moe-fine:8 \
  wide_mbs4:moe-wide:4; do
  IFS=: read -r name model mbs <<< "$spec"
  wanted $name || continue
  run t_$name 150 $B train $model $C --mbs $mbs --gbs $((4 * mbs)) --csv "$R/t_$name.csv"
  grep -E "^step time|^memory|^MoE" "$R/t_$name.log" | sed "s/^/  $name: /" >> "$S"
done
for spec in fine_ep2:moe-fine:4 wide_ep2:moe-wide:4 test_ep2:moe-test:4; do
  IFS=: read -r name model mbs <<< "$spec"
  wanted $name || continue
  run t_$name 150 $B train $model $C --mbs $mbs --gbs $((4 * mbs)) --dp 2 --ep 2 --csv "$R/t_$name.csv"
  grep -E "^step time|^memory|^MoE" "$R/t_$name.log" | sed "s/^/  $name: /" >> "$S"
done
kill $SMI_PID 2>/dev/null; keep; cat "$S"
