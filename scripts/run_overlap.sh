#!/usr/bin/env bash
# One device call for calibrate --comm's overlap measurement (docs/model.md, "Overlap is not free"):
# builds nothing (build/sextant-gpu, build/sextant and .deps/ are carried from the build machine),
# runs on every GPU of this node (2 or more), and leaves everything under $OUT:
#   gpu.txt, topo.txt, nccl.txt, date.txt, ldd.txt;
#   overlap.log       the collectives' table and fit, then the overlap table (GEMM alone / beside each
#                     collective, the collective alone / beside the GEMM, the slowdowns) and its medians;
#   overlap.csv       one row per GEMM shape x collective x size (--overlap-csv);
#   overlap-overlay.csv  the hwdb overlay: intra-node link terms and the overlap_* slowdowns;
#   smi.csv           SM clock, power and clock limiters every 200 ms (a slowdown may be a clock drop);
#   hw-check.txt      the overlay loaded back by the planner (it refuses a key out of range).
# The collectives' sweep stops at 256 MiB (the fit's own range) to leave the time to the overlap.
# .deps/lib holds the libraries the device machine lacks (GSL, libcsv, cJSON), made on the build machine:
#   mkdir -p .deps/lib && cp -L $(ldd build/sextant-gpu | awk '/libgsl|libcsv|libcjson/{print $3}') .deps/lib/
# Extra flags for calibrate --comm in OVERLAP_FLAGS, e.g.
#   OVERLAP_FLAGS="--overlap-shapes 8192x8192x8192,4096x4096x4096 --overlap-bytes 64M,256M --overlap-repeats 15"
set -u
. "$(dirname "$0")/device_env.sh"
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
nvidia-smi >> "$OUT/gpu.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
ldd build/sextant-gpu > "$OUT/ldd.txt" 2>&1
{
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  grep -E "libnccl|libcublas" "$OUT/ldd.txt"
  for f in $(grep -oE '/[^ ]*libnccl\.so[^ ]*' "$OUT/ldd.txt"); do readlink -f "$f"; done
} > "$OUT/nccl.txt" 2>&1
if grep -q "not found" "$OUT/ldd.txt"; then
  echo "run_overlap.sh: build/sextant-gpu is missing libraries here:"; grep "not found" "$OUT/ldd.txt"; exit 1
fi
N=$(nvidia-smi -L | wc -l)
if [ "$N" -lt 2 ]; then echo "run_overlap.sh: needs 2 or more GPUs, this node has $N"; exit 1; fi
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 200 > "$OUT/smi.csv" 2>/dev/null &
SMI=$!
# NCCL_DEBUG=VERSION prints the library version on the first communicator
# shellcheck disable=SC2086
NCCL_DEBUG=VERSION timeout 540 build/sextant-gpu calibrate --comm --gpus "$N" --max-bytes 256M \
  --overlap-csv "$OUT/overlap.csv" --out "$OUT/overlap-overlay.csv" ${OVERLAP_FLAGS:-} > "$OUT/overlap.log" 2>&1
rc=$?
kill "$SMI" 2>/dev/null; wait "$SMI" 2>/dev/null
echo "exit status $rc" >> "$OUT/overlap.log"
sed -n '/# overlap:/,$p' "$OUT/overlap.log"
if [ $rc -eq 0 ] && [ -s "$OUT/overlap-overlay.csv" ]; then
  GPU=$(awk -F, '$2=="intra_gbs_per_dir"{print $1; exit}' "$OUT/overlap-overlay.csv")
  grep -E "^[^#\"].*,overlap_" "$OUT/overlap-overlay.csv"
  build/sextant hw "$GPU" --calibration "$OUT/overlap-overlay.csv" > "$OUT/hw-check.txt" 2>&1
  echo "overlay loads in the planner: exit status $?" | tee -a "$OUT/hw-check.txt"
fi
exit $rc
