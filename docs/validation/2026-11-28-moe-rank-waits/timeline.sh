#!/usr/bin/env bash
# Where Mixtral's two ranks wait on each other (CP 2 at the ring exchange, TP 2 + SP at the first collective, PP 2
# in the bubble): the held-out layouts of docs/validation/2026-11-27-h200x2-heldout-moe with SEXTANT_TIMELINE (every
# op call of the profiling step, per rank, begin and end on its stream); OLMoE's CP 2 and ZeRO-3 beside.  Run from
# the repository root on two GPUs with build/sextant-gpu and .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-moe-rank-waits/timeline.sh      (RUNS: a regex of the layouts' names)
# On one GPU it runs Mixtral alone at 2048 tokens a micro-batch (CP 2's 512 rows an expert) and at 4096 (the 1gpu
# runs); SEXTANT_MOE_ROUTE=balanced (docs/guide.md) deals every expert the same rows.
#   -> $OUT/summary.txt, $OUT/timeline.tar
set -u
. scripts/device_env.sh
device_start timeline
P=${TMPDIR:-/tmp}/timeline-root
private_root "$P" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv build/sextant-gpu
G=$P/build/sextant-gpu
C="--gpu $GPU --mbs 1 --attention flash --steps 12 --warmup 4"
S4="--seq 4096 --gbs 8"
runs=("cp2:$S4 --cp 2" "tp2sp:$S4 --tp 2 --sp" "pp2:$S4 --pp 2" "dp2z1:$S4 --dp 2 --zero 1" "cp2_olmoe:$S4 --cp 2"
      "dp2z3_olmoe:$S4 --dp 2 --zero 3" "1gpu_s2k:--seq 2048 --gbs 16" "1gpu:$S4" "1gpu_s2k_again:--seq 2048 --gbs 16")
# one GPU: Mixtral alone at CP 2's rows an expert (512: 2048 tokens a micro-batch) and at 1024, without the ring
[ "$(nvidia-smi -L | grep -c '^GPU')" -lt 2 ] && RUNS=${RUNS:-^1gpu}
device_sample "$R/smi.csv"
for spec in "${runs[@]}"; do
    name=${spec%%:*} flags=${spec#*:} model=mixtral-2l
    [ -n "${RUNS:-}" ] && ! [[ $name =~ $RUNS ]] && continue
    case $name in *_olmoe) model=olmoe-4l ;; esac
    SEXTANT_TIMELINE="$R/tl_$name" run "$name" 150 $G train $model $C $flags --csv "$R/$name.csv"
    grep -E "^step time|^power|^MoE rows" "$R/$name.log" | cut -c1-160 | sed "s/^/  $name: /" >> "$S"
done
kill "$SMI_PID" 2>/dev/null
keep
