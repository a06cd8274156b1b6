#!/bin/bash
# docs/validation/2026-11-27-gemm-clock-time/heldout.sh H200_OVERLAY H100_OVERLAY [SEXTANT]: the recorded runs and
# published rows no power fit has seen, priced with the two overlays (fit-power's "before" column, the overlay as
# given), from the repository root.  Sets:
#   H200 multi-GPU: the 28 dense two- and four-GPU runs of 2026-11-26-h200x2-calibrated/timed and
#                   2026-11-26-h200x4-calibrated/{layouts,comm4} (their MoE runs are the MoE model's older kernels,
#                   superseded by the Qwen report's);
#   Qwen held-out:  2026-11-26-h200x2-heldout-qwen/after, the held-out model's one GPU and twelve two-GPU layouts
#                   (the MoE model's three among them), and the same without the MoE model;
#   2 x H100:       tests/data/2026-11-26-h100x2-unseen (LLaMA 3.2 3B and GPT-2 large, ten layouts);
#   published:      ../shared/data/published/runs.csv, the H100 rows with the H100 overlay, by source.
set -u
H200=$1; H100=$2; S=${3:-build/sextant}
Z=docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv
QZ=docs/validation/2026-11-26-h200x2-heldout-qwen/zoo_heldout.csv
list() { ls "$@" | paste -sd, -; }
multi=$(for f in docs/validation/2026-11-26-h200x4-calibrated/layouts/t4_*.csv docs/validation/2026-11-26-h200x4-calibrated/comm4/t4c_*.csv \
                 docs/validation/2026-11-26-h200x2-calibrated/timed/t_*.csv; do
            awk -F, 'NR==1 {for (i = 1; i <= NF; i++) c[$i] = i} NR>1 && $c["op"]=="step" && $c["calibrated"]=="1" {
                     if ($c["gpus"] > 1 && $c["model"] !~ /^moe/) print FILENAME; exit}' "$f"
        done | paste -sd, -)
before() { "$S" fit-power "$@" --out /tmp/heldout-$$.csv | sed -n 's/^before (the overlay as given): //p'; rm -f /tmp/heldout-$$.csv; }
echo "H200 multi-GPU ($(echo "$multi" | tr , '\n' | wc -l) runs): $(before --gpu h200 --calibration "$H200" --models "$Z" --runs "$multi")"
echo "Qwen held-out, 2 x H200 (14 runs): $(before --gpu h200 --calibration "$H200" --models "$QZ" --runs "$(list docs/validation/2026-11-26-h200x2-heldout-qwen/after/*.csv)")"
echo "  of them the dense model's 11: $(before --gpu h200 --calibration "$H200" --models "$QZ" --runs "$(ls docs/validation/2026-11-26-h200x2-heldout-qwen/after/*.csv | grep -v moe | paste -sd, -)")"
echo "2 x H100 unseen: $(before --gpu h100-sxm --calibration "$H100" --models "$Z" --runs "$(list tests/data/2026-11-26-h100x2-unseen/*.csv)")"
"$S" published --runs ../shared/data/published/runs.csv --calibration "$H100" --format json > /tmp/heldout-$$.json
python3 - /tmp/heldout-$$.json <<'PY'
import json, sys, statistics as st
from collections import defaultdict
d = json.load(open(sys.argv[1]))
rows = [x for x in d['rows'] if x.get('estimated') and x.get('gpu', '').startswith('h100') and 'signed_err' in x]
groups = defaultdict(list)
for x in rows: groups[x['source_group']].append(x['signed_err'])
print("published H100 rows (%d): %.2f%% mean |error|, %+.2f%% signed" % (len(rows), 100 * st.mean(abs(e) for e in
      (x['signed_err'] for x in rows)), 100 * st.mean(x['signed_err'] for x in rows)))
for g in sorted(groups):
    e = groups[g]
    print("  %-28s %3d rows  %.1f%% (%+.1f%%)" % (g, len(e), 100 * st.mean(map(abs, e)), 100 * st.mean(e)))
PY
rm -f /tmp/heldout-$$.json
