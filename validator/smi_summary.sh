#!/usr/bin/env bash
# Mean SM clock and power, and the share of samples the power cap limited, per run:
#   smi_summary.sh RUNS SMI
# RUNS: lines "NAME YYYY/MM/DD HH:MM:SS.mmm", each run ended by a line "end ...";
# SMI: nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,
#      clocks_event_reasons.active --format=csv,noheader samples (timestamps in the same form).
set -u
awk -F', ' 'NR == FNR { split($0, f, " "); name[NR] = f[1] == "end" ? "" : f[1]; st[NR] = f[2] " " f[3]; n = NR; next }
            { ts = $1; clk = $2 + 0; pw = $3 + 0; cap = ($5 ~ /[4c]$/) ? 1 : 0;
              for (i = 1; i < n; i++) if (name[i] != "" && ts >= st[i] && ts < st[i + 1]) {
                  c[i] += clk; p[i] += pw; k[i]++; capped[i] += cap } }
            END { printf "%-34s %8s %10s %8s %12s\n", "run", "samples", "SM MHz", "W", "power-capped";
                  for (i = 1; i < n; i++) if (name[i] != "" && k[i] > 0)
                      printf "%-34s %8d %10.0f %8.0f %11.0f%%\n", name[i], k[i], c[i] / k[i], p[i] / k[i], 100 * capped[i] / k[i] }' \
    "$1" "$2"
