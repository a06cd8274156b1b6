# scripts/device_env.sh: the preamble every device script shares.  Source it from the repository root
# (the scripts do: . "$(dirname "$0")/device_env.sh"); it defines
#   device_record DIR    DIR/gpu.txt (each GPU's name, driver, memory, top SM and memory clocks, power limit)
#                        and DIR/date.txt (UTC, ISO 8601): the device and date every report records;
#   device_sample FILE   SM clock, power, temperature and clock limiters every 200 ms into FILE, in the
#                        background, its pid in SMI_PID (the power cap sets the clock a step runs at;
#                        scripts/smi_summary.sh reads the samples).
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
