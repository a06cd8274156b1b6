#!/usr/bin/env bash
# One device call on 2 GPUs: CP 2 with the ring's K, V pack as a kernel (sx_copy_rows, marked cp_kv_pack)
# against the build before (.carry/old: a strided cudaMemcpy2DAsync, unmarked), in turns; the copy's kernel
# checks; both builds' losses against one GPU and each other, bit for bit.
# Carried: build/sextant, build/sextant-gpu, build/gpu/test_kernels, .carry/old/{sextant,sextant-gpu}, .deps/lib.
#   OUT=DIR bash scripts/run_cp_pack.sh
set -u
. "$(dirname "$0")/device_env.sh"
device_start cp-pack
run kernels 300 ./build/gpu/test_kernels --attention
grep -E "add_rows|copy_rows|checks|FAIL" "$R/kernels.log" | tail -12 | sed 's/^/  /' >> "$S"
C="gpt2 --gpu $GPU --seq 1024 --mbs 8 --gbs 32 --steps 20 --warmup 5 --attention flash --cp 2"
L="llama3.2-1b --gpu $GPU --seq 4096 --mbs 1 --gbs 8 --steps 12 --warmup 3 --attention flash --cp 2"
for round in 1 2; do
  for b in old new; do
    bin=./build/sextant; [ $b = old ] && bin=./.carry/old/sextant
    for m in "gpt2:$C" "llama:$L"; do
      tag=${m%%:*}; args=${m#*:}
      [ $tag = llama ] && [ $round = 2 ] && continue
      name=${tag}_cp2_${b}$round
      SEXTANT_TIMELINE="$R/tl_$name" run "t_$name" 150 $bin validate $args --calibration "$CAL" --csv "$R/t_$name.csv"
      grep -E "^step time" "$R/t_$name.log" | cut -c1-160 | sed "s/^/  $name: /" >> "$S"
    done
  done
done
for model in gpt2 llama3.2-1b; do
  E="$model --gpu $GPU --seq 256 --mbs 2 --gbs 8 --steps 12 --warmup 2 --every-step --attention flash"
  run "eq_${model}_1gpu" 120 ./build/sextant-gpu train $E --losses "$R/eq_${model}_1gpu.txt"
  for b in old new; do
    g=./build/sextant-gpu; [ $b = old ] && g=./.carry/old/sextant-gpu
    run "eq_${model}_cp2_$b" 120 $g train $E --cp 2 --losses "$R/eq_${model}_cp2_$b.txt"
    say "  $(compare "$R/eq_${model}_1gpu.txt" "$R/eq_${model}_cp2_$b.txt")  $model cp2 $b against one GPU"
  done
  if cmp -s "$R/eq_${model}_cp2_old.txt" "$R/eq_${model}_cp2_new.txt"; then say "  $model cp2: new and old losses identical bit for bit"
  else say "  $model cp2: new and old losses differ"; fi
done
keep
