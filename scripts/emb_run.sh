# The embedding backward on one GPU: tests (full sizes), memcheck on the quick sizes, the
# benchmark with the apply's sweep.  Results in $OUT/emb.
set -u
. "$(dirname "$0")/device_env.sh"
R=$OUT/emb; mkdir -p $R
device_record "$R"
timeout 200 build/gpu/test_kernels --embedding > $R/test_emb.log 2>&1; echo "test rc=$?"
grep -E "FAIL|checks" $R/test_emb.log | head -20
timeout 150 compute-sanitizer --tool memcheck build/gpu/test_kernels --quick --embedding > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -3 $R/memcheck.log
timeout 200 build/gpu/bench_kernels --embedding --sweep > $R/bench_emb.log 2>&1; echo "bench rc=$?"
grep -E "embedding_bwd|copy" $R/bench_emb.log | grep -v "tiled, sweep\|atomic\|sorted" | sed 's/ N=.*uniq=[0-9]* */ /' | cut -c1-150
