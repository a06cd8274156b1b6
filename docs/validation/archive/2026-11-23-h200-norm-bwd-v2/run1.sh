#!/bin/bash
# device call 1: the norm backward sweep (every variant of versions 1 and 2), the norm tests,
# compute-sanitizer on the quick norm tests, ncu of three settings, SASS of norm.o.
# Binaries built on the CPU machine (nvcc 13.0.88, sm_90, static cudart), run from this folder.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || echo ncu)
T0=$(date +%s)
{ echo "# command: bash run1.sh"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit,clocks.sm,temperature.gpu --format=csv; (nvcc --version || /usr/local/cuda/bin/nvcc --version) 2>&1 | tail -2; echo "binaries built with nvcc 13.0.88 (sm_90), static cudart"; date -u; } > $OUT/gpu.txt 2>&1
timeout 20 ./test_kernels --norm --quick > $OUT/test.log 2>&1; echo "quick rc=$? t=$(( $(date +%s)-T0 ))s" >> $OUT/test.log
timeout 50 ./bench_kernels --sweep --norm > $OUT/sweep.log 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-T0 ))s" >> $OUT/sweep.log
timeout 30 ./test_kernels --norm >> $OUT/test.log 2>&1; echo "test rc=$? t=$(( $(date +%s)-T0 ))s" >> $OUT/test.log
{ for tool in memcheck racecheck; do echo "=== compute-sanitizer --tool $tool test_kernels --quick --norm"; timeout 20 $SAN --tool $tool --error-exitcode 9 ./test_kernels --quick --norm 2>&1 | grep -v PASS | tail -20; echo "=== $tool rc=${PIPESTATUS[0]} t=$(( $(date +%s)-T0 ))s"; done; } > $OUT/sanitizer.log 2>&1
(cuobjdump -sass norm.o 2>&1 || /usr/local/cuda/bin/cuobjdump -sass norm.o 2>&1) | gzip > $OUT/norm_sass.txt.gz
{ for a in "0 32768 768 0 3 1 0 0 0" "0 32768 768 0 1 0 0 0 0" "0 8192 4096 0 3 2 0 0 0"; do
    L=$(( 140 - ($(date +%s)-T0) )); [ $L -lt 12 ] && break
    echo "=== ncu bench_kernels --profile $a"
    timeout $L $NCU --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis -k regex:"norm_bwd|norm_backward_(rows|staged)" -c 1 --launch-skip 1 ./bench_kernels --profile $a 2>&1 | grep -v "^==PROF==" | tail -120
  done; } > $OUT/ncu.txt 2>&1
echo "t=$(( $(date +%s)-T0 ))s"
grep -E "FAIL|checks|rc=" $OUT/test.log | head -20
grep -E "^===" $OUT/sanitizer.log
grep -E "copy D2D|rc=" $OUT/sweep.log
# per size: the automatic row, then the 4 fastest sweep rows
grep -vE "^#|sweep|rc=" $OUT/sweep.log | awk '{print "AUTO", $1, $2, $3, $5"us", $10}'
awk '/\(sweep/ {pct=$10; sub("%","",pct); n=index($0,"(sweep"); print $1"\t"$2"\t"$3"\t"pct"\t"$5"\t"substr($0,n+7)}' $OUT/sweep.log | sort -t$'\t' -k1,3 -k4,4nr | awk -F'\t' '{k=$1$2$3; c[k]++; if (c[k]<=4) print $1, $2, $3, $4"%", $5"us", $6}'
