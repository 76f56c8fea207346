#!/bin/bash
# Kernel sweep on the GPU machine (kernels/README.md, "Choosing the block size"): compute-only
# frames for each shipped (N, S, P, loop, B), forced with --step-kernel (plain launches) and --block-size
# (loop: 0 classic, 1 mass-scaled, 2 equal-mass; the bench's Plummer sphere has equal masses). Output: OUT_DIR/sweep.csv (host
# frame median, ms).
# NBODY_BIN: the binary (default .device/bin/).
o=${1:?usage: kernels/sweep.sh OUT_DIR}; b=${NBODY_BIN:-.device/bin/nbody-interop}; mkdir -p "$o"
echo "n,split,p,loop,block,frame_ms" > $o/sweep.csv
for n in 16384 32768 65536 131072; do
  for cfg in "1 1 0" "1 2 0" "1 4 0" "4 1 0" "8 1 0" "2 2 1" "4 2 1" "8 2 1" "1 4 1" "4 2 2" "1 4 2"; do
    set -- $cfg; s=$1; p=$2; m=$3
    for blk in 128 256 512 1024; do
      [ $((blk % (32 * s))) -ne 0 ] && continue
      case $m in 0) [ "$s" = 1 ] && k=nbody_step_p$p || k=nbody_step_s$s ;; 1) k=nbody_step_m${p}x$s ;; 2) k=nbody_step_u${p}x$s ;; esac
      r=$(timeout 30 $b bench --modes compute --bodies $n --step-kernel $k --block-size $blk --frames 10 --warmup 2 --rounds 1 --out /tmp/sw-$n-$s-$p-$m-$blk 2>&1 | grep -m1 "^compute N=" | sed "s/.*median \([0-9.]*\) ms.*/\1/")
      echo "$n,$s,$p,$m,$blk,$r" >> $o/sweep.csv
    done
  done
done
