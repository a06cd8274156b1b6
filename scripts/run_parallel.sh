#!/usr/bin/env bash
# One device call on 2 x H200: the multi-GPU training step's equivalence with
# one GPU (loss of every step, same data and weights), then timed layouts.
# Binary built on the development machine, carried with .deps/lib.
# PHASE=equiv | timed | faults | final | equiv_pp | interleaved | m_eq_pp | four_timed | four_equiv | all (default all).  Results in $OUT/results.tar.
set -u
. "$(dirname "$0")/device_env.sh"
GPU=${GPU:-h200}
PHASE=${PHASE:-all}
R=$OUT/run; mkdir -p "$R"
device_record "$R"
G=./build/sextant-gpu
run() { # name, args...
  local n=$1; shift
  timeout ${TMO:-300} $G train "$@" > "$R/$n.log" 2>&1
  echo "$n rc=$?"
  tar -C "$OUT" -cf "$OUT/results.tar" run   # after every run: a call cut short still brings back what ran
}
if [ "$PHASE" = equiv ] || [ "$PHASE" = all ]; then
  for model in gpt2 llama3.2-1b; do
    E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
    run "eq_${model}_1gpu" $E --losses "$R/eq_${model}_1gpu.txt"
    for lay in "tp2:--tp 2" "tp2sp:--tp 2 --sp" "pp2:--pp 2" "dp2:--dp 2" "dp2z1:--dp 2 --zero 1" "rc:--recompute full" \
               "tp2sprc:--tp 2 --sp --recompute full"; do
      name=${lay%%:*}; flags=${lay#*:}
      run "eq_${model}_$name" $E $flags --losses "$R/eq_${model}_$name.txt"
    done
  done
fi
if [ "$PHASE" = equiv_pp ]; then
  for model in gpt2 llama3.2-1b; do
    E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
    run "eq_${model}_1gpu" $E --losses "$R/eq_${model}_1gpu.txt"
    run "eq_${model}_pp2" $E --pp 2 --losses "$R/eq_${model}_pp2.txt"
  done
fi
if [ "$PHASE" = interleaved ]; then
  # interleaved 1F1B: every step's loss against one GPU, then timed layouts beside plain 1F1B
  for model in gpt2 llama3.2-1b; do
    E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
    run "eq_${model}_1gpu" $E --losses "$R/eq_${model}_1gpu.txt"
    run "eq_${model}_pp2vpp2" $E --pp 2 --vpp 2 --losses "$R/eq_${model}_pp2vpp2.txt"
  done
  E="llama3.2-1b --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step"
  run "eq_llama3.2-1b_pp2vpp4" $E --pp 2 --vpp 4 --losses "$R/eq_llama3.2-1b_pp2vpp4.txt"
  run "eq_llama3.2-1b_pp2vpp2rc" $E --pp 2 --vpp 2 --recompute full --losses "$R/eq_llama3.2-1b_pp2vpp2rc.txt"
  C="--calibration ${CAL:-docs/validation/2026-11-23-h200x2-train/h200-x2.csv}"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --steps 15"
  M="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 15"
  # (plain 1F1B at the same sizes: docs/validation/archive/2026-11-23-h200x2-verify, the same day)
  for spec in "llama_pp2vpp2:$L --gbs 16 --pp 2 --vpp 2" "llama_pp2vpp4:$L --gbs 16 --pp 2 --vpp 4" \
              "gpt2m_pp2vpp2:$M --gbs 64 --pp 2 --vpp 2" "gpt2m_pp2vpp2rc:$M --gbs 64 --pp 2 --vpp 2 --recompute full" \
              "gpt2m_pp2vpp2_m2:$M --gbs 16 --pp 2 --vpp 2"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t_$name" $args $C --csv "$R/t_$name.csv"
  done
fi
if [ "$PHASE" = m_eq_pp ]; then
  # micro-batches per step = pp (hung with --vpp 2 on 2 x H200 before comm_warmup): plain 1F1B, interleaved, and
  # interleaved without the communicators' warm-up (should hang: the watchdog ends it at 41 s)
  TMO=${TMO:-60}   # --timeout 20: a GPU wait gives up at 20 s, a host stuck in NCCL at 41 s (launch_watchdog)
  C="--calibration docs/validation/2026-11-23-h200x2-train/h200-x2.csv"
  run "m2_gpt2m_pp2" gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 16 --pp 2 --steps 10 --warmup 2 --timeout 20 $C \
    --csv "$R/m2_gpt2m_pp2.csv"
  run "m2_gpt2m_pp2vpp2" gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 16 --pp 2 --vpp 2 --steps 10 --warmup 2 \
    --timeout 20 $C --csv "$R/m2_gpt2m_pp2vpp2.csv"
  run "m2_llama_pp2vpp2" llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 4 --pp 2 --vpp 2 --steps 10 --warmup 2 \
    --timeout 20 $C --csv "$R/m2_llama_pp2vpp2.csv"
  SEXTANT_TRAIN_NO_COMM_WARMUP=1 run "m2_gpt2m_pp2vpp2_nowarm" gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --gbs 16 --pp 2 \
    --vpp 2 --steps 4 --warmup 1 --timeout 20
fi
if [ "$PHASE" = four_timed ]; then
  # 4 GPUs (issue 5's second machine): the node's collectives, then TP x PP x DP layouts of both models, calibrated,
  # and the issue's mpirun example; one call of at most 600 s (the tar after every run keeps what ran)
  $G calibrate --gpu $GPU --out "$R/one.csv" > "$R/calibrate.log" 2>&1; echo "calibrate rc=$?"
  timeout 200 $G calibrate --comm --gpus 4 --gpu $GPU --max-bytes 1G --out "$R/comm4.csv" > "$R/comm4.log" 2>&1
  echo "comm rc=$?"
  { cat "$R/one.csv"; tail -n +2 "$R/comm4.csv"; } > "$R/$GPU-x4.csv"
  tar -C "$OUT" -cf "$OUT/results.tar" run
  C="--calibration $R/$GPU-x4.csv"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --steps 12 --gbs 16"
  M="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 12 --gbs 64"
  for spec in "llama_tp2pp2:$L --tp 2 --pp 2" "llama_tp2pp2sp:$L --tp 2 --pp 2 --sp" "llama_tp2spdp2:$L --tp 2 --sp --dp 2" \
              "llama_pp2dp2z1:$L --pp 2 --dp 2 --zero 1" "llama_tp4:$L --tp 4" "llama_pp4:$L --pp 4" "llama_dp4:$L --dp 4" \
              "llama_pp4vpp2:$L --pp 4 --vpp 2" "llama_tp2pp2rc:$L --tp 2 --pp 2 --recompute full" \
              "gpt2m_tp2pp2:$M --tp 2 --pp 2" "gpt2m_pp2dp2:$M --pp 2 --dp 2" "gpt2m_tp4:$M --tp 4" "gpt2m_pp4:$M --pp 4" \
              "gpt2m_dp4z1:$M --dp 4 --zero 1" "gpt2m_pp4vpp2:$M --pp 4 --vpp 2"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t4_$name" $args $C --csv "$R/t4_$name.csv"
  done
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout 200 mpirun -np 4 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH ./build/sextant validate llama3.2-1b --gpu $GPU --tp 2 --pp 2 \
    --mbs 4 --gbs 64 --steps 30 $C --csv "$R/t4_mpirun_llama_tp2pp2.csv" > "$R/t4_mpirun_llama_tp2pp2.log" 2>&1
  echo "mpirun rc=$?"
fi
if [ "$PHASE" = four_equiv ]; then
  # every layout's loss against one GPU, the TP x PP x DP combinations included (4 GPUs present)
  bash tests/gpu/parallel_equivalence.sh $G $GPU > "$R/equivalence4.log" 2>&1; echo "equivalence rc=$?"
  SEXTANT_TRAIN_FAIL=3:4 timeout 120 $G train llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 15 --tp 2 --pp 2 \
    > "$R/fault_tp2pp2.log" 2>&1; echo "fault rc=$?"
fi
if [ "$PHASE" = timed ] || [ "$PHASE" = all ]; then
  # calibration: one GPU's microbenchmarks, then the node's collectives; one overlay
  $G calibrate --gpu $GPU --out "$R/one.csv" > "$R/calibrate.log" 2>&1; echo "calibrate rc=$?"
  timeout 240 $G calibrate --comm --gpus 2 --gpu $GPU --max-bytes 1G --out "$R/comm.csv" > "$R/comm.log" 2>&1; echo "comm rc=$?"
  { cat "$R/one.csv"; tail -n +2 "$R/comm.csv"; } > "$R/$GPU-x2.csv"
  C="--calibration $R/$GPU-x2.csv"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --steps 15"
  M="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 15"
  for spec in "llama_1gpu:$L --gbs 8" "llama_tp2:$L --gbs 16 --tp 2" "llama_tp2sp:$L --gbs 16 --tp 2 --sp" \
              "llama_tp2sprc:$L --gbs 16 --tp 2 --sp --recompute full" "llama_pp2:$L --gbs 16 --pp 2" \
              "llama_dp2:$L --gbs 16 --dp 2" "llama_dp2z1:$L --gbs 16 --dp 2 --zero 1" \
              "llama_dp2rc:$L --gbs 16 --dp 2 --recompute full" \
              "gpt2m_1gpu:$M --gbs 32" "gpt2m_tp2:$M --gbs 64 --tp 2" "gpt2m_tp2sp:$M --gbs 64 --tp 2 --sp" \
              "gpt2m_pp2:$M --gbs 64 --pp 2" "gpt2m_dp2:$M --gbs 64 --dp 2" "gpt2m_dp2z1:$M --gbs 64 --dp 2 --zero 1" \
              "gpt2m_pp2rc:$M --gbs 64 --pp 2 --recompute full"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t_$name" $args $C --csv "$R/t_$name.csv"
  done
fi
if [ "$PHASE" = faults ] || [ "$PHASE" = all ]; then
  # a rank that dies mid-run: every other rank must stop within seconds, naming it
  start=$(date +%s.%N)
  SEXTANT_TRAIN_FAIL=1:4 timeout 120 $G train llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 --steps 15 --dp 2 \
    > "$R/fault_dp2.log" 2>&1; echo "fault rc=$? after $(awk -v a=$start -v b=$(date +%s.%N) "BEGIN{printf \"%.1f\", b-a}") s" | tee -a "$R/fault_dp2.log"
  timeout 60 $G train llama3.2-1b --gpu $GPU --tp 4 > "$R/refuse_tp4.log" 2>&1; echo "refuse rc=$?" | tee -a "$R/refuse_tp4.log"
  bash tests/gpu/parallel_equivalence.sh $G $GPU > "$R/equivalence.log" 2>&1; echo "equivalence rc=$?"
fi
if [ "$PHASE" = final ]; then
  # the float64 gradient check (one GPU), mpirun's launch, and two plans larger than the machine validated as slices
  $G check-gradients > "$R/check_gradients.log" 2>&1; echo "check-gradients rc=$?"
  C="--calibration docs/validation/2026-11-23-h200x2-train/h200-x2.csv"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  timeout 200 mpirun -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH $G train llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --gbs 16 \
    --steps 15 --dp 2 --zero 1 $C --csv "$R/t_mpirun_llama_dp2z1.csv" > "$R/t_mpirun_llama_dp2z1.log" 2>&1; echo "mpirun rc=$?"
  B=./build/sextant
  $B estimate llama3.2-1b --gpu $GPU --gpus 64 --tp 2 --pp 4 --mbs 2 --gbs 128 --seq 2048 --sp --zero 1 --recompute selective \
    --format json > "$R/plan_tp2pp4dp8.json"
  $B estimate llama3.2-1b --gpu $GPU --gpus 64 --tp 1 --pp 4 --mbs 2 --gbs 128 --seq 2048 --zero 1 \
    --format json > "$R/plan_pp4dp16.json"
  for p in tp2pp4dp8 pp4dp16; do
    timeout 200 $G train --plan "$R/plan_$p.json" --gpus 2 --steps 15 $C --csv "$R/slice_$p.csv" > "$R/slice_$p.log" 2>&1
    echo "slice $p rc=$?"
  done
fi
if [ "$PHASE" = pipeline ]; then
  # calibrate --comm again (NCCL's memory per kind of communicator), then the pipeline layouts with it
  timeout 240 $G calibrate --comm --gpus 2 --gpu $GPU --max-bytes 1G --out "$R/comm.csv" > "$R/comm.log" 2>&1; echo "comm rc=$?"
  { cat docs/validation/2026-11-23-h200x2-train/one.csv 2>/dev/null || head -1 "$R/comm.csv"; tail -n +2 "$R/comm.csv"; } > "$R/$GPU-x2.csv"
  C="--calibration $R/$GPU-x2.csv"
  L="llama3.2-1b --gpu $GPU --seq 2048 --mbs 2 --steps 15"
  M="gpt2-medium --gpu $GPU --seq 1024 --mbs 8 --steps 15"
  for spec in "llama_pp2:$L --gbs 16 --pp 2" "gpt2m_pp2:$M --gbs 64 --pp 2" "gpt2m_pp2rc:$M --gbs 64 --pp 2 --recompute full" \
              "gpt2m_tp2:$M --gbs 64 --tp 2"; do
    name=${spec%%:*}; args=${spec#*:}
    run "t_$name" $args $C --csv "$R/t_$name.csv"
  done
fi
cd "$OUT" && tar cf results.tar run && rm -rf run
for f in $(tar tf results.tar | grep "eq_.*txt$"); do echo "$f: $(tar xOf results.tar $f | awk '{printf "%s ", $2}')"; done
for f in $(tar tf results.tar | grep "eq_.*\.log$"); do echo "== $f"; tar xOf results.tar $f | grep -E "rror|rank [0-9]+:|loss .* ->|DID NOT" | head -4; done
for f in $(tar tf results.tar | grep "t_.*\.log$"); do echo "== $f"; tar xOf results.tar $f | grep -E "step time|uncalibrated|memory:" | cut -c1-160; done
tar xOf results.tar run/comm.log 2>/dev/null | grep -E "fit|communicator|overlay|time =" | head -12
for f in fault_dp2 refuse_tp4 equivalence check_gradients t_mpirun_llama_dp2z1 slice_tp2pp4dp8 slice_pp4dp16; do echo "== $f"; tar xOf results.tar run/$f.log 2>/dev/null | tail -16; done
tar xOf results.tar run/t_gpt2m_tp2sp.log 2>/dev/null | grep -E "tp_|step "
