#!/usr/bin/env bash
# The ten two-GPU layouts of tests/data/2026-11-26-h200-calibrated/two-gpu again, with the training step as it is
# now (those ran at 09:00 on 2026-11-26, before db9aab5 queued ZeRO-3's reduce-scatters behind the next take's
# gathers), and Mixtral's four MoE layouts not measured since its expert GEMMs took cuBLAS's exact-shape algorithm
# (2581822): PP 2, CP 2, CP 2 x EP 2, ZeRO-3 with recomputation.  Each priced as a user's validate prices it (the
# card's shipped overlay); docs/validation/2026-11-27-h200x2-zero-overhead.  From the repository root, build/ carried:
#   OUT=DIR bash scripts/run_zero_rerun.sh      -> $OUT/summary.txt, $OUT/zero-rerun.tar
set -u
. "$(dirname "$0")/device_env.sh"
device_start zero-rerun
G=build/sextant-gpu
C="--gpu $GPU --steps 20 --warmup 5 --attention unfused"
L="llama3.2-1b --seq 2048 --mbs 2 --gbs 16 $C"
T="gpt2 --seq 1024 --mbs 8 --gbs 64 $C"
M="gpt2-medium --seq 1024 --mbs 8 --gbs 64 $C"
for spec in "t_gpt2_dp2z1:$T --dp 2 --zero 1" "t_gpt2_dp2z2:$T --dp 2 --zero 2" "t_gpt2_dp2z3:$T --dp 2 --zero 3" \
            "t_llama_dp2z1:$L --dp 2 --zero 1" "t_llama_dp2z2:$L --dp 2 --zero 2" "t_llama_dp2z3:$L --dp 2 --zero 3" \
            "t_llama_tp2sp:$L --tp 2 --sp" "t_llama_pp2:$L --pp 2" "t_gpt2m_tp2:$M --tp 2" "t_gpt2m_pp2:$M --pp 2"; do
  name=${spec%%:*} flags=${spec#*:}
  run "$name" 120 $G train $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory|^power" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
P=${TMPDIR:-/tmp}/zero-rerun-root
private_root "$P" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv build/sextant-gpu
X="mixtral-2l --gpu $GPU --steps 30 --warmup 5 --seq 4096 --mbs 1 --gbs 8 --attention flash"
for spec in "mixtral_pp2:--pp 2" "mixtral_cp2:--cp 2" "mixtral_cp2ep2:--cp 2 --ep 2" \
            "mixtral_dp2z3rc:--dp 2 --zero 3 --recompute full"; do
  name=${spec%%:*} flags=${spec#*:}
  run "$name" 150 $P/build/sextant-gpu train $X $flags --csv "$R/$name.csv"
  grep -E "^step time|^memory|^power" "$R/$name.log" | sed "s/^/  $name: /" >> "$S"
done
keep
