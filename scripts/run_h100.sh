#!/usr/bin/env bash
# The one-GPU validation reports (docs/validation/), in one or two device calls of under 10 minutes:
#   PART=1: calibrate, then train every model x micro-batch twice, unfused attention: on hwdb
#           defaults (uncalibrated) and with the fresh overlay (calibrated);
#   PART=2: the same nine runs with the fused attention (--attention flash), calibrated with
#           CAL (an earlier overlay, copied into the tree between the calls) and uncalibrated;
#           MODES="unfused flash" runs all 18 on CAL;
#   PART=all: both after one calibrate (about 6 minutes on an H100).
# The binaries are built on the development machine and carried with .deps/lib (GSL, libcsv,
# cJSON).  GPU=h200 for an H200.  Everything lands in $OUT/results.tar.
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-h100-sxm}
PART=${PART:-1}
UNCAL=${UNCAL:-1}   # 0: leave out the runs on hwdb defaults
CALFLAGS=${CALFLAGS:-}   # e.g. --warm, --no-step-fit, --step-runs DIR
R=$OUT/run; mkdir -p "$R"
device_record "$R"
G=./build/sextant-gpu
device_sample "$R/smi.csv"
stamp() { date +%Y/%m/%d\ %H:%M:%S.%3N; }
if [ "$PART" = 2 ]; then
  CAL=${CAL:?PART=2 needs CAL, the overlay of an earlier calibrate}
  cp "$CAL" "$R/"
  MODES=${MODES:-flash}   # MODES="unfused flash": all 18 on that overlay (e.g. CAL=hwdb/measured/h100-sxm.csv)
else
  CAL="$R/$GPU.csv"
  echo "calibrate $(stamp)" >> "$R/runs.txt"
  timeout 400 $G calibrate --gpu "$GPU" --out "$CAL" $CALFLAGS > "$R/calibrate.log" 2>&1
  rc=$?; echo "calibrate rc=$rc"; echo "end $(stamp)" >> "$R/runs.txt"
  if [ $rc != 0 ]; then tail -20 "$R/calibrate.log"; cd "$OUT" && tar cf results.tar run && rm -rf run; exit 1; fi
  MODES=unfused; [ "$PART" = all ] && MODES="unfused flash"
fi
for ATT in $MODES; do
  P=train; [ $ATT = flash ] && P=flash
  for spec in "gpt2 8 1024" "gpt2 16 1024" "gpt2 32 1024" "gpt2-medium 4 1024" "gpt2-medium 8 1024" "gpt2-medium 16 1024" \
              "llama3.2-1b 1 2048" "llama3.2-1b 2 2048" "llama3.2-1b 4 2048"; do
    set -- $spec
    n="${1}_mbs$2"
    [ "$UNCAL" = 1 ] && timeout 60 $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps 20 --attention $ATT \
       --csv "$R/uncal_${P}_$n.csv" > "$R/uncal_${P}_$n.log" 2>&1
    echo "${P}_$n $(stamp)" >> "$R/runs.txt"
    timeout 90 $G train "$1" --gpu "$GPU" --mbs "$2" --seq "$3" --steps 50 --attention $ATT --calibration "$CAL" \
       --csv "$R/${P}_$n.csv" --json "$R/${P}_$n.json" > "$R/${P}_$n.log" 2>&1
    echo "$ATT $n rc=$?"; echo "end $(stamp)" >> "$R/runs.txt"
  done
done
kill $SMI_PID 2>/dev/null
bash scripts/smi_summary.sh "$R/runs.txt" "$R/smi.csv" > "$R/clocks.txt"; cat "$R/clocks.txt"
cd "$OUT" && tar cf results.tar run && rm -rf run
tar xOf results.tar run/calibrate.log 2>/dev/null | grep -E "copy|launch|fit|efficiency|shapes timed"
tar xOf results.tar run/calibrate.log 2>/dev/null | sed -n '/^power (per/,/^model: P/p'
for f in $(tar tf results.tar | grep -E "run/(train|flash)_.*log"); do echo "$f: $(tar xOf results.tar $f | grep -E 'step time|^power|rror')"; done
for f in $(tar tf results.tar | grep "uncal_.*log"); do echo "$f: $(tar xOf results.tar $f | grep -E 'step time|rror')"; done
