#!/usr/bin/env bash
# Why Mixtral's two-GPU steps time slower than their own profiling step (TP 2 + SP: timed median 226.8 ms, the
# profiling step 217.5, its ops priced within 1% of it; docs/validation/2026-11-28-expert-algos): each layout of the
# MoE held-out set that read -5..-6.5% run as the held-out script runs it, every step's time printed (--every-step),
# then again with one thing changed:
#   poll0   SEXTANT_POWER_POLL_MS=0: no NVML sampler over the timed steps (the profiling step runs without one)
#   probe   SEXTANT_CLOCK_PROBE=all: the SM clock after every timed step and every op of the profiling step
#   random  SEXTANT_MOE_ROUTE=random: every expert Binomial(N, k/E) rows, as a balanced router deals them
# No nvidia-smi sampler beside them (it would be a second poller).  Run from the repository root on two GPUs with
# build/sextant-gpu and .deps/lib carried:
#   OUT=DIR bash docs/validation/2026-11-28-moe-timed-steps/run.sh     (RUNS: a regex of NAME_VARIANT)
#   -> $OUT/summary.txt, $OUT/timed-steps.tar
set -u
. scripts/device_env.sh
device_start timed-steps
P=${TMPDIR:-/tmp}/timed-steps-root
private_root "$P" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv build/sextant-gpu
G=$P/build/sextant-gpu
C="--gpu $GPU --seq 4096 --mbs 1 --gbs 8 --attention flash --steps 20 --warmup 5 --every-step"
layouts=("tp2sp:--tp 2 --sp" "dp2z1:--dp 2 --zero 1" "cp2:--cp 2" "pp2:--pp 2")
variants=("base:" "poll0:SEXTANT_POWER_POLL_MS=0" "probe:SEXTANT_CLOCK_PROBE=all" "random:SEXTANT_MOE_ROUTE=random")
for l in "${layouts[@]}"; do
    for v in "${variants[@]}"; do
        name=${l%%:*}_${v%%:*} flags=${l#*:} envs=${v#*:}
        [ -n "${RUNS:-}" ] && ! [[ $name =~ $RUNS ]] && continue
        run "$name" 120 env $envs $G train ${MODEL:-mixtral-2l} $C $flags --csv "$R/$name.csv"
        grep -E "^step time|^power:|^host:|^SM clock|profiling step" "$R/$name.log" | cut -c1-170 | sed "s/^/  $name: /" >> "$S"
    done
done
keep
