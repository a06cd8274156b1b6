# scripts/device_env.sh: the preamble every device script shares.  Source it from the repository root
# (the scripts do: . "$(dirname "$0")/device_env.sh"); it defines
#   device_record DIR    DIR/gpu.txt (each GPU's name, driver, memory, top SM and memory clocks, power limit)
#                        and DIR/date.txt (UTC, ISO 8601): the device and date every report records;
#   device_sample FILE   SM clock, power, temperature and clock limiters every 200 ms into FILE, in the
#                        background, its pid in SMI_PID (the power cap sets the clock a step runs at;
#                        scripts/smi_summary.sh reads the samples).
#   device_begin NAME    R=$TMPDIR/NAME and S=$OUT/summary.txt, both emptied (OUT made where it is missing), and
#                        device_record R: a script's start;
#   device_start NAME    the same for a script that prices with the card's shipped overlay: OUT required, GPU (the
#                        card's hwdb row unless set) and CAL=hwdb/measured/$GPU.csv, and the cards said first;
# and, for a script that has set R (its run folder, whose name names the tar) and S (its summary file):
#   say LINE...          LINE on stdout and appended to S;
#   keep                 R tarred into $OUT/<R's name>.tar, after every run: a call cut short still brings
#                        back what ran;
#   run NAME SECONDS CMD...   CMD under timeout, its output in R/NAME.log, "NAME rc=N" said, then keep;
#                        returns CMD's status;
#   run_windowed NAME SECONDS CMD...   the same, its start and end in R/runs.txt (what scripts/smi_summary.sh
#                        reads to give each run its clocks from device_sample's samples);
#   equiv TAG ARGS NAME:FLAGS...   one GPU's losses and each layout's, each judged by compare;
#   compare A B          two loss files ("step loss" per line) judged as tests/gpu/parallel_equivalence.sh
#                        judges them (1% at any step, 0.5% at the last): one PASS/FAIL line;
#   card_row             the hwdb row of the card that came (h200 or h100-sxm): the lent multi-GPU kinds
#                        give H100s or H200s.
#   train_steps ROOT SECONDS LIST   held-out training steps ("model mbs seq attention|...") with the card's overlay;
#   private_root DIR ZOO BIN   DIR made a root of its own (hwdb/, ZOO as models/zoo.csv, BIN as build/sextant-gpu,
#                        which finds its data beside it): held-out models run without touching the checkout's zoo.
# and puts the libraries carried from the build machine (.deps/lib: GSL, libcsv, cJSON) on the library
# path, with NVLink multicast off (NCCL_NVLS_ENABLE=0, mandatory on the lent machines).
export LD_LIBRARY_PATH="$PWD/.deps/lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0

device_record() {
    mkdir -p "$1"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
        --format=csv > "$1/gpu.txt" 2>&1
    date -u +%Y-%m-%dT%H:%M:%SZ > "$1/date.txt"
}

device_sample() {
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv,noheader -lms 200 > "$1" 2>/dev/null &
    SMI_PID=$!
}

# device_begin NAME: the run folder R=$TMPDIR/NAME (emptied), the summary S=$OUT/summary.txt (emptied), and the
# device and date recorded in R (device_record): every script's first three lines, once
device_begin() {
    R=${TMPDIR:-/tmp}/$1
    rm -rf "$R"
    mkdir -p "$R"
    # OUT made here: a folder under $OUT that did not exist lost a whole call's runs (their summary and tars could not
    # be written; docs/validation/2026-11-27-h100h200-gemm-sustained)
    mkdir -p "${OUT:?OUT must name the folder the results go to}" || return 1
    S=$OUT/summary.txt
    : > "$S"
    device_record "$R"
}

say() { echo "$*" | tee -a "$S"; }

device_start() {
    : "${OUT:?OUT must name the folder the results go to}"
    GPU=${GPU:-$(card_row)}
    CAL=hwdb/measured/$GPU.csv
    device_begin "$1"
    say "cards: $(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | tr -s ' '); overlay $CAL"
}

keep() { tar -C "$(dirname "$R")" -cf "$OUT/$(basename "$R").tar" "$(basename "$R")"; }

run() {
    local name=$1 seconds=$2; shift 2
    timeout "$seconds" "$@" > "$R/$name.log" 2>&1
    local rc=$?
    say "$name rc=$rc"
    keep
    return $rc
}

run_windowed() {
    echo "$1 $(date +%Y/%m/%d\ %H:%M:%S.%3N)" >> "$R/runs.txt"
    run "$@"
    local rc=$?
    echo "end $(date +%Y/%m/%d\ %H:%M:%S.%3N)" >> "$R/runs.txt"
    return $rc
}

# equiv TAG TRAIN_ARGS NAME:FLAGS...: `$G train TRAIN_ARGS` on one GPU and with each layout's FLAGS, every step's
# loss written, each layout judged against the one GPU by compare (one PASS/FAIL line said per layout, naming TAG);
# rc 1 ("loss did not fall", the 12-step check) still writes the losses, which are compared
equiv() {
    local tag=$1 args=$2 lay name flags
    shift 2
    run "eq_${tag}_1gpu" 120 $G train $args --losses "$R/eq_${tag}_1gpu.txt"
    for lay in "$@"; do
        name=${lay%%:*}; flags=${lay#*:}
        run "eq_${tag}_$name" 120 $G train $args $flags --losses "$R/eq_${tag}_$name.txt"
        if [ -s "$R/eq_${tag}_1gpu.txt" ] && [ -s "$R/eq_${tag}_$name.txt" ]; then
            say "  $(compare "$R/eq_${tag}_1gpu.txt" "$R/eq_${tag}_$name.txt")  $tag $name"
        else
            say "  FAIL no losses to compare  $tag $name: $(grep -m1 -iE 'error|internal|refuse|rank' "$R/eq_${tag}_$name.log")"
        fi
    done
}

compare() {
    paste "$1" "$2" | awk '
        { d = ($4 - $2) / $2; if (d < 0) d = -d; if (d > worst) { worst = d; at = $1 } last = d }
        END { ok = NR > 0 && worst <= 0.01 && last <= 0.005
              printf "%s worst %.4f%% (step %d), last %.4f%% over %d steps", ok ? "PASS" : "FAIL", 100 * worst, at, 100 * last, NR }'
}

card_row() { if nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -q H200; then echo h200; else echo h100-sxm; fi; }

# train_steps ROOT SECONDS "MODEL MBS SEQ ATTENTION|...": each step run by ROOT/build/sextant-gpu as the held-out
# reports run them (gbs = mbs, 20 steps of which 5 warm up, the card's shipped overlay, --csv beside its log in R),
# each under SECONDS, its step and power lines said
train_steps() {
    local root=$1 seconds=$2 list=$3 c name
    local IFS='|'
    set -f
    for c in $list; do
        IFS=' '
        set -- $c
        name="$1_mbs$2_seq$3_$4"
        run "$name" "$seconds" "$root/build/sextant-gpu" train "$1" --gpu "$GPU" --mbs "$2" --gbs "$2" --seq "$3" \
            --attention "$4" --steps 20 --warmup 5 --calibration "hwdb/measured/$GPU.csv" --csv "$R/$name.csv"
        say "  $name: $(grep -E '^step +all' "$R/$name.log") | $(grep -E '^power:' "$R/$name.log" | cut -c1-60)"
        IFS='|'
    done
    set +f
}

private_root() {
    rm -rf "$1"
    mkdir -p "$1/build" "$1/models"
    cp -r hwdb "$1/hwdb"
    cp "$2" "$1/models/zoo.csv"
    cp "$3" "$1/build/sextant-gpu"
}
