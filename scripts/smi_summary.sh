#!/usr/bin/env bash
# Mean SM clock and power, and the share of samples the power cap limited, per run:
#   smi_summary.sh RUNS SMI
# RUNS: lines "NAME YYYY/MM/DD HH:MM:SS.mmm", each run ended by a line "end ...";
# SMI: nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,
#      clocks_event_reasons.active --format=csv,noheader samples (timestamps in the same form).
# A run's window includes its host-side start (building the model, reading the overlay), when the
# GPU idles near 100 W at its top clock; the "busy" columns keep the samples drawing 250 W or
# more, which is where the steps run.
set -u
awk -F', ' 'NR == FNR { split($0, f, " "); name[NR] = f[1] == "end" ? "" : f[1]; st[NR] = f[2] " " f[3]; n = NR; next }
            { ts = $1; clk = $2 + 0; pw = $3 + 0; cap = ($5 ~ /[4c]$/) ? 1 : 0;
              for (i = 1; i < n; i++) if (name[i] != "" && ts >= st[i] && ts < st[i + 1]) {
                  c[i] += clk; p[i] += pw; k[i]++; capped[i] += cap;
                  if (pw >= 250) { bc[i] += clk; bp[i] += pw; bk[i]++; bcap[i] += cap;
                                   if (!(i in bmin) || clk < bmin[i]) bmin[i] = clk; if (clk > bmax[i]) bmax[i] = clk } } }
            END { printf "%-34s %8s %10s %8s %12s | %6s %10s %11s %8s %12s\n", "run", "samples", "SM MHz", "W",
                         "power-capped", "busy", "SM MHz", "min-max", "W", "power-capped";
                  for (i = 1; i < n; i++) if (name[i] != "" && k[i] > 0) {
                      printf "%-34s %8d %10.0f %8.0f %11.0f%%", name[i], k[i], c[i] / k[i], p[i] / k[i], 100 * capped[i] / k[i];
                      if (bk[i] > 0) printf " | %6d %10.0f %5d-%-5d %8.0f %11.0f%%\n", bk[i], bc[i] / bk[i], bmin[i], bmax[i],
                                            bp[i] / bk[i], 100 * bcap[i] / bk[i];
                      else printf " | %6d\n", 0 } }' \
    "$1" "$2"
