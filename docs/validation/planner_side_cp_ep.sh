#!/bin/bash
# The planner's side of the CP 2 and EP 2 validator runs (docs/validation/2026-11-26-h200x2-cp and
# 2026-11-26-h200x2-ep): each run's layout and the hwdb the report used, the step and memory predicted
# beside what was measured. WHATIF=1 adds NCCL's figures measured on 2 x H200 (intra-node collectives
# and per-communicator memory, docs/validation/2026-11-23-h200x2-train/h200-x2.csv), which the reports'
# hwdb lacked: how much of each gap is those figures. Run from the repository root after `make`.
set -euo pipefail
S=${SEXTANT:-build/sextant}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
H100=hwdb/measured/h100-sxm.csv H200=none
if [ "${WHATIF:-0}" = 1 ]; then
    src=docs/validation/2026-11-23-h200x2-train/h200-x2.csv
    { head -1 "$src"; grep -E '^h200,(intra_|nccl_)' "$src"; } > "$tmp/h200.csv"
    { cat "$H100"; grep -E '^h200,(intra_|nccl_)' "$src" | sed 's/^h200,/h100-sxm,/'; } > "$tmp/h100.csv"
    H100=$tmp/h100.csv H200=$tmp/h200.csv
fi
row() {   # name, measured ms, measured GiB, estimate's arguments
    local name=$1 ms=$2 gib=$3; shift 3
    "$S" estimate "$@" --recompute none --no-dropout --attention sextant --format json |
        python3 -c "
import json, sys
d = json.load(sys.stdin); t = d['time']; step = t['step_s'] * 1e3; mem = d['memory']['total'] / 2**30
print('%-18s step %8.2f ms (meas. %8.2f, %+6.1f%%)  CP %6.3f  EP %6.3f ms  memory %7.3f GiB (meas. %7.3f, %+6.1f%%)'
      % ('$name', step, $ms, 100 * (step / $ms - 1), t['cp_comm_s'] * 1e3, t['ep_comm_s'] * 1e3, mem, $gib, 100 * (mem / $gib - 1)))"
}
C=(--gpu h100-sxm --calibration "$H100" --gpus 2 --cp 2)
row "gpt2 cp2 s1024" 50.83 6.849 gpt2 "${C[@]}" --mbs 8 --gbs 32 --seq 1024
row "llama cp2 s4096" 377.74 24.757 llama3.2-1b "${C[@]}" --mbs 1 --gbs 8 --seq 4096
row "llama cp2 s8192" 435.95 27.727 llama3.2-1b "${C[@]}" --mbs 1 --gbs 4 --seq 8192
E=(--gpu h200 --calibration "$H200" --seq 1024)
row "moe dp2 ep1 mbs4" 20.65 10.237 moe-test "${E[@]}" --gpus 2 --dp 2 --mbs 4 --gbs 16
row "moe dp2 ep2 mbs4" 21.42 9.110 moe-test "${E[@]}" --gpus 2 --dp 2 --ep 2 --mbs 4 --gbs 16
row "moe dp2 ep2 mbs8" 36.25 10.798 moe-test "${E[@]}" --gpus 2 --dp 2 --ep 2 --mbs 8 --gbs 32
