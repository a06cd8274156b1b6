#!/usr/bin/env bash
# After the change (validator/moe.h, MOE_ALGO_BUCKET: every expert GEMM takes its 16-row bucket's algorithm, asked at
# the bucket's top): one layer's expert GEMMs again (version 7 is now the validator's new way; 2 cublasGemmEx, 8
# cuBLASLt asked at each exact shape), then Mixtral cut to 2 layers at 512 rows an expert, and the held-out runs of
# 2026-11-28-routed-rows-heldout (Mixtral at 256, 768 and 2048 rows an expert, OLMoE at 128) with the changed
# validator.  From the repository root with build/sextant-gpu, build/dev/expert_grouped and .deps/lib:
#   OUT=DIR bash docs/validation/2026-11-28-expert-algos/after.sh     -> $OUT/summary.txt, $OUT/after.tar, $OUT/heldout.tar
set -u
. scripts/device_env.sh
device_start after
P=${TMPDIR:-/tmp}/after-root
private_root "$P" docs/validation/2026-11-27-h200x2-heldout-moe/zoo_heldout.csv build/sextant-gpu
G=$P/build/sextant-gpu
device_sample "$R/smi.csv"
bench() {   # model, tag, options...
    local model=$1 tag=$2
    shift 2
    run_windowed "bench-$model-$tag" 240 build/dev/expert_grouped "$model" --passes fwd,dgrad,wgrad "$@" 2 7 8
}
bench mixtral r256 --rows 256 --cv 0.25
bench mixtral r512 --rows 512 --cv 0.28
bench mixtral even512 --rows 512 --even
bench mixtral r768 --rows 768 --cv 0.30
bench olmoe r512 --rows 512 --cv 0.5
C="--gpu $GPU --attention flash --steps 12 --warmup 4"
name=mixtral_s2k_lt16
run_windowed "$name" 150 $G train mixtral-2l --seq 2048 --mbs 1 --gbs 16 $C --csv "$R/$name.csv"
grep -E "^step time|^power|^MoE " "$R/$name.log" | cut -c1-170 | sed "s/^/  $name: /" >> "$S"
kill "$SMI_PID" 2>/dev/null
keep
OUT=$OUT/heldout bash docs/validation/2026-11-28-routed-rows-heldout/run.sh
cat "$OUT/heldout/summary.txt" >> "$S"
