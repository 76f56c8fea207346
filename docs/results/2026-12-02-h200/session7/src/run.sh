#!/usr/bin/env bash
# DIR holds kernels/kbench.cu, the committed PTX as before.ptx and the variants from mk.py (g?o?p?.ptx).
# Call 1 (its script not kept) ran kbench over before.ptx and o0.ptx (= G 1, O 0, P 0) for m2x4, m4x1
# and m4x4 at B = 1024 and every N, and over the G 1 orders o1 o3 o4 o5 o6 for m4x1 at 131072,
# 262144 and 1048576; then o0, o3 and before again at 131072 and 262144 (the -r2 rows).
# Session 7, call 2: the self-tile guard as a phase loop (g2: one unguarded trip instance, the
# guarded trips only where the warp's own bodies sit), trip addressing from a pointer (p1), m4x1 orders.
set -u
cd "${1:?usage: run.sh DIR}"
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/smi.txt"
nvcc -O2 -o /tmp/kb kbench.cu -lcuda || exit 1
one() { tag=$1; n=$2; k=$3; /tmp/kb "$tag.ptx" "$n" "$k" 1024 | sed "s/^/$tag,/" | grep -v ",n,kernel" >> "$out/exp.csv"; }
for tag in before g2o0p1 g2o1p1 g2o4p1 g2o5p1 g2o6p1 g0o0p1; do
  for n in 131072 262144 1048576; do one $tag $n nbody_step_m4x1; done
done
for tag in before g2o0p1; do
  for n in 16384 65536 131072; do one $tag $n nbody_step_m2x4; one $tag $n nbody_step_m4x4; done
  one $tag 16384 nbody_step_m4x1; one $tag 65536 nbody_step_m4x1
done
for tag in before g2o0p1 g2o4p1; do
  for n in 131072 262144; do /tmp/kb "$tag.ptx" "$n" nbody_step_m4x1 1024 | sed "s/^/$tag-r2,/" | grep -v ",n,kernel" >> "$out/exp.csv"; done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$out/smi.txt"
