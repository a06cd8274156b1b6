# One device call after the embedding backward's split into prepare + apply: every kernel
# test, the embedding benchmark with its sweep, the whole benchmark table, and GPT-2 124M
# training at micro-batch 32 (unfused and fused attention; prepare on its own stream).
# Results in $OUT/final.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/lib
R=$OUT/final; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $R/gpu.txt; date -u >> $R/gpu.txt
timeout 200 build/gpu/test_kernels > $R/test_kernels.log 2>&1; echo "test rc=$?"; grep -E "FAIL|checks" $R/test_kernels.log | head
timeout 150 build/gpu/bench_kernels --embedding --sweep > $R/bench_emb.log 2>&1; echo "bench emb rc=$?"
timeout 120 build/gpu/bench_kernels > $R/bench.log 2>&1; echo "bench rc=$?"
CAL=docs/validation/h100-train-2026-11-23/h100-sxm.csv
for att in unfused flash; do
  timeout 90 build/sextant-gpu train gpt2 --gpu h100-sxm --mbs 32 --seq 1024 --steps 30 --attention $att --calibration $CAL \
     --csv $R/gpt2_mbs32_$att.csv > $R/gpt2_mbs32_$att.log 2>&1; echo "train $att rc=$?"
  grep -E "loss .* ->|step time|tokens/s|predicted .* GiB|^embedding|rror" $R/gpt2_mbs32_$att.log
done
grep -E "embedding_bwd|copy\)" $R/bench_emb.log | grep -v "tiled, sweep\|atomic\|sorted" | sed 's/ N=.*uniq=[0-9]* */ /' | cut -c1-150
grep -E "mean|%copy" $R/bench.log | tail -3
