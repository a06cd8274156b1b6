#!/usr/bin/env bash
# The experts weighing their rows by the gates in the SwiGLU (Megatron-Core's permuted probs, validator/moe.c), on
# two GPUs: the MoE kernels against their float64 reference, every MoE layout's loss against one GPU, then the MoE
# held-out models' two-GPU layouts (docs/validation/2026-11-27-h200x2-heldout-moe's zoo) priced by the card's overlay,
# their memory beside the runs that kept the experts' outputs for the combine's backward.
#   OUT=DIR bash scripts/run_moe_weighted.sh            (PARTS: any of "kernels equiv olmoe mixtral"; default all;
#                                                       OLMOE_RUNS, MIXTRAL_RUNS: a RUNS regex of the model's layouts)
#   -> $OUT/summary.txt, $OUT/moe-weighted.tar (and the held-out runs' heldout-2gpu.tar under $OUT/MODEL)
set -u
. "$(dirname "$0")/device_env.sh"
PARTS=${PARTS:-kernels equiv olmoe mixtral}
GPU=${GPU:-$(card_row)}
device_begin moe-weighted
say "device: $(sed -n 2p "$R/gpu.txt"); $(cat "$R/date.txt"); parts: $PARTS"
case " $PARTS " in *" kernels "*)
  run moe_kernels 120 build/gpu/test_moe_kernels
  say "  $(tail -n 1 "$R/moe_kernels.log")"
  grep -E "FAIL" "$R/moe_kernels.log" | sed 's/^/  /' >> "$S" ;;
esac
case " $PARTS " in *" equiv "*)
  run equivalence 420 env ONLY='^moe-test' tests/gpu/parallel_equivalence.sh build/sextant-gpu
  grep -E "^(PASS|FAIL)|parallel_equivalence" "$R/equivalence.log" | sed 's/^/  /' >> "$S" ;;
esac
for model in olmoe-4l mixtral-2l; do
  case " $PARTS " in *" ${model%%-*} "*)
    runs=OLMOE_RUNS; [ "$model" = mixtral-2l ] && runs=MIXTRAL_RUNS
    OUT=$OUT/$model MODEL=$model RUNS=${!runs:-} LAYOUTS=moe STEPS=20 WARMUP=5 \
      ZOO=docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv bash scripts/run_heldout_2gpu.sh
    S=$OUT/summary.txt
    sed "s/^/  $model /" "$OUT/$model/summary.txt" >> "$S" ;;
  esac
done
keep
