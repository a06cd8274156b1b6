#!/bin/bash
# device call 2, given inline to the device tool (run from the repository root, binaries of call 1):
# the norm backward sweep again (run-to-run spread), then every GPU test.
cd .wt-kern2 && export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib; T0=$(date +%s); timeout 14 ./bench_kernels --sweep --norm > $OUT/sweep2.log 2>&1; echo "sweep rc=$? t=$(( $(date +%s)-T0 ))s" >> $OUT/sweep2.log; timeout 132 ./test_kernels > $OUT/test_full.log 2>&1; echo "test rc=$? t=$(( $(date +%s)-T0 ))s" >> $OUT/test_full.log; date -u >> $OUT/test_full.log; grep -E "FAIL|checks|rc=" $OUT/test_full.log | head; tail -2 $OUT/sweep2.log
