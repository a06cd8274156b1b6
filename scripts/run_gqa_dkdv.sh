#!/usr/bin/env bash
# The fused attention's dK, dV kernel with a kv head's query heads split over blocks where its grid is small
# (kernels/attention.cu, dkdv_splits): test_kernels' attention checks, then the held-out Qwen2.5-3B shape of ZOO
# (2 KV heads of 8 query heads each) on one GPU and at TP 2 (one kv head a rank), with and without SP, and at CP 2,
# with the build before the change (OLD) and after it, in turns; then the equivalence layouts ONLY picks (default:
# LLaMA-3.2 1B at TP 2, whose rank splits its group of 4, and at CP 2; GPT-2's TP 2, MHA, unsplit).
#   OUT=DIR ZOO=docs/validation/2026-11-26-h200x2-heldout-qwen/zoo_heldout.csv OLD=.carry/old/sextant-gpu \
#     bash scripts/run_gqa_dkdv.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start gqa-dkdv
run kernels 300 build/gpu/test_kernels --attention
grep -E "checks|FAIL" "$R/kernels.log" | tail -3 >> "$S"
NEW=${TMPDIR:-/tmp}/root-new OLDR=${TMPDIR:-/tmp}/root-old
private_root "$NEW" "${ZOO:?}" build/sextant-gpu
private_root "$OLDR" "$ZOO" "${OLD:?}"
C="--gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps ${STEPS:-20} --warmup ${WARMUP:-5} --attention flash"
for spec in "1gpu:" "tp2:--tp 2" "tp2sp:--tp 2 --sp" "cp2:--cp 2"; do
  name=${spec%%:*} flags=${spec#*:}
  for v in old new; do
    root=$NEW; [ $v = old ] && root=$OLDR
    run "${v}_$name" 120 "$root/build/sextant-gpu" train qwen2.5-3b-12l $C $flags --csv "$R/${v}_$name.csv"
    grep -E "^step time" "$R/${v}_$name.log" | sed "s/^/  ${v}_$name: /" >> "$S"
    grep -E "^attention_bwd " "$R/${v}_$name.log" | sed "s/^/  ${v}_$name: /" >> "$S"
  done
done
export ONLY=${ONLY:-'^llama3.2-1b (tp2|tp2\+sp|cp2)$|^gpt2 tp2$'}
run equivalence 240 tests/gpu/parallel_equivalence.sh build/sextant-gpu "$GPU"
grep -E '^(PASS|FAIL)|^parallel_equivalence' "$R/equivalence.log" >> "$S"
keep
