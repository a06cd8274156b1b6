set -u
. scripts/device_env.sh
W=/tmp/md; rm -rf $W; mkdir -p $W/build $W/models; cp -r hwdb $W/hwdb
cp docs/validation/2026-11-26-h100-attention-heldout/zoo_heldout.csv $W/models/zoo.csv
cp build/sextant-gpu $W/build/
device_record $OUT
for spec in "u2k:2048 unfused" "s2k:2048 sextant" "u4k:4096 unfused" "s4k:4096 sextant"; do
  name=${spec%%:*}; args=${spec#*:}
  set -- $args
  timeout 150 $W/build/sextant-gpu train mixtral-8x7b-1l --gpu h100-sxm --mbs 2 --gbs 2 --seq $1 --attention $2 \
     --steps 20 --warmup 5 --calibration hwdb/measured/h100-sxm.csv --csv $OUT/$name.csv > $OUT/$name.log 2>&1
  echo "== $name rc=$?"; grep -E "^expert_|^step +all|^MoE buf|^power" $OUT/$name.log | cut -c1-200
done
