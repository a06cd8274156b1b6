#!/usr/bin/env bash
# make fuzz: runs each fuzz target for SECONDS, one after the other, from its seeds in
# fuzz/corpus/<target>/ and the corpus it grew before under BUILD/corpus/<target>/; prints its
# executions per second and corpus size; exits 1 when any target found a crash, a leak, a
# timeout (over 10 s), an out-of-memory (over 2 GB) or a sanitizer report.
#   usage: fuzz/run.sh BUILD SECONDS TARGET...
set -uo pipefail
build=$1 seconds=$2
shift 2
failed=0
for t in "$@"; do
    # the largest input each target reads: CSV tables and configs of a few kB, a command line
    case $t in
        overlay|published|plan) max_len=16384 ;;
        zoo|hf_config) max_len=8192 ;;
        cli) max_len=1024 ;;
        *) max_len=4096 ;;
    esac
    work=$build/corpus/$t log=$build/fuzz_$t.log
    mkdir -p "$work" "$build/artifacts"
    # -close_fd_mask=3: the library's own stdout and stderr (the CLI's error lines) are closed; libFuzzer's
    # and the sanitizers' reports still go to the log
    "$build/fuzz_$t" -max_total_time="$seconds" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$build/artifacts/$t-" \
        "$work" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    # libFuzzer's last status line: the edges covered and the corpus it kept (inputs/bytes)
    cov=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    corp=$(grep -E '(DONE|pulse|NEW|REDUCE) +cov:' "$log" | tail -1 | sed -n 's/.* corp: \([^ ]*\).*/\1/p')
    if [ $rc -eq 0 ]; then verdict=clean; else verdict="FAILED (exit $rc, see $log)"; failed=1; fi
    echo "fuzz_$t: ${seconds} s, ${runs:-?} runs, ${rate:-?} exec/s, corpus ${corp:-?} (inputs/size), ${cov:-?} edges covered: $verdict"
    if [ $rc -ne 0 ]; then grep -E 'ERROR|SUMMARY|runtime error|Test unit written|^artifact' "$log" | head -20; fi
done
if [ $failed -ne 0 ]; then echo "make fuzz: FAILED"; exit 1; fi
echo "make fuzz: every target clean"
