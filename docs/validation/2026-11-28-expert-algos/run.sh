#!/usr/bin/env bash
# Why do Mixtral's experts at 256 rows run at about 190 TFLOP/s in the step when calibrate times a GEMM of the same
# tile count and K at 486?  One layer's expert GEMMs (dev/cuda/expert_grouped: version 2 cublasGemmEx on four
# streams, 7 the validator's cuBLASLt with its 128-row buckets' algorithms, 8 cuBLASLt asked at each exact shape;
# each expert's algorithms on stderr), then the step itself (Mixtral cut to 2 layers, 1024 tokens, 256 rows an
# expert) with the validator's cuBLASLt buckets and with SEXTANT_MOE_GEMM=ex.  From the repository root with
# build/sextant-gpu, build/dev/expert_grouped and .deps/lib:
#   OUT=DIR bash docs/validation/2026-11-28-expert-algos/run.sh      -> $OUT/summary.txt, $OUT/algos.tar
set -u
. scripts/device_env.sh
device_start algos
P=${TMPDIR:-/tmp}/algos-root
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
bench mixtral r768 --rows 768 --cv 0.30
bench mixtral even256 --rows 256 --even
bench olmoe r128 --rows 128 --cv 1.0
C="--gpu $GPU --attention flash --steps 12 --warmup 4"
for how in lt ex; do
    for spec in "mixtral_s1k:mixtral-2l --seq 1024 --mbs 1 --gbs 32" "mixtral_s2k:mixtral-2l --seq 2048 --mbs 1 --gbs 16"; do
        name=${spec%%:*}_$how args=${spec#*:}
        SEXTANT_MOE_GEMM=$how run_windowed "$name" 150 $G train $args $C --csv "$R/$name.csv"
        grep -E "^step time|^power|^MoE " "$R/$name.log" | cut -c1-170 | sed "s/^/  $name: /" >> "$S"
    done
done
kill "$SMI_PID" 2>/dev/null
keep
