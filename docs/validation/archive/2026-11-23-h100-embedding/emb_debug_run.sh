# GPT-2 124M, micro-batch 32, 30 steps on one GPU: the one-call embedding backward (default) and
# the split (SEXTANT_TRAIN_EMB_SPLIT=1), then the embedding tests.  Results in $OUT/dbg.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/lib
R=$OUT/dbg; mkdir -p $R
CAL=docs/validation/h100-train-2026-11-23/h100-sxm.csv
for split in 0 1; do
  SEXTANT_TRAIN_EMB_SPLIT=$split timeout 90 build/sextant-gpu train gpt2 --gpu h100-sxm --mbs 32 --seq 1024 --steps 30 \
     --calibration $CAL --csv $R/gpt2_split$split.csv > $R/gpt2_split$split.log 2>&1; echo "split $split rc=$?"
  grep -E "^step|loss .* ->|step time|^embedding" $R/gpt2_split$split.log
done
timeout 250 build/gpu/test_kernels --embedding > $R/test_emb.log 2>&1; echo "test rc=$?"; grep -E "FAIL|checks" $R/test_emb.log | head
