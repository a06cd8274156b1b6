#!/usr/bin/env bash
# One device call for calibrate --comm: builds nothing (build/ and .deps/ are
# carried from the build machine), measures NCCL collectives on every GPU of
# this node and leaves everything under $OUT:
#   gpu.txt, topo.txt, nccl.txt, date.txt, ldd.txt, comm.log (the table and
#   the fit), comm-overlay.csv (the hwdb overlay), estimate-*.txt (the planner
#   before and after the overlay).
set -u
. "$(dirname "$0")/device_env.sh"
: "${OUT:?OUT must name the folder the results go to}"
mkdir -p "$OUT"
device_record "$OUT"
nvidia-smi >> "$OUT/gpu.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
ldd build/sextant-gpu > "$OUT/ldd.txt" 2>&1
# No nccl-tests binaries here: record which NCCL the run used instead.
{
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  grep -E "libnccl" "$OUT/ldd.txt"
  for f in $(grep -oE '/[^ ]*libnccl\.so[^ ]*' "$OUT/ldd.txt"); do readlink -f "$f"; done
  command -v all_reduce_perf >/dev/null 2>&1 && echo "nccl-tests: $(command -v all_reduce_perf)" || echo "nccl-tests: not installed"
} > "$OUT/nccl.txt" 2>&1
if grep -q "not found" "$OUT/ldd.txt"; then
  echo "run_comm.sh: build/sextant-gpu is missing libraries here:"; grep "not found" "$OUT/ldd.txt"; exit 1
fi
N=$(nvidia-smi -L | wc -l)
# NCCL_DEBUG=VERSION prints the library version on the first communicator
NCCL_DEBUG=VERSION build/sextant-gpu calibrate --comm --gpus "$N" --out "$OUT/comm-overlay.csv" > "$OUT/comm.log" 2>&1
rc=$?
echo "exit status $rc" >> "$OUT/comm.log"
cat "$OUT/comm.log"
if [ $rc -eq 0 ] && [ -s "$OUT/comm-overlay.csv" ]; then
  GPU=$(awk -F, '$2=="intra_gbs_per_dir"{print $1; exit}' "$OUT/comm-overlay.csv")
  build/sextant estimate llama2-7b --gpu "$GPU" --gpus "$N" --tp "$N" > "$OUT/estimate-hwdb.txt" 2>&1
  build/sextant estimate llama2-7b --gpu "$GPU" --gpus "$N" --tp "$N" --calibration "$OUT/comm-overlay.csv" \
      > "$OUT/estimate-calibrated.txt" 2>&1
  grep -E "TP communication|step  " "$OUT/estimate-hwdb.txt" "$OUT/estimate-calibrated.txt"
fi
exit $rc
