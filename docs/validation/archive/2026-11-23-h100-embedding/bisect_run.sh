# GPT-2 124M, micro-batch 32, 40 steps on one GPU with the binaries of two earlier commits
# (build/bisect/), to place the loss divergence seen after step 20.  Results in $OUT/bis.
set -u
export LD_LIBRARY_PATH=$PWD/.deps/lib
R=$OUT/bis; mkdir -p $R
for b in eaec475 f141703; do
  timeout 100 build/bisect/sextant-gpu-$b train gpt2 --gpu h100-sxm --mbs 32 --seq 1024 --steps 40 > $R/gpt2_$b.log 2>&1
  echo "$b rc=$?"; grep -E "^step|loss .* ->" $R/gpt2_$b.log
done
