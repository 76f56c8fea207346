#!/usr/bin/env bash
# One device call of session 6's sweeps (on the GPU machine; DIR holds kbench_exp.cu — kernels/kbench.cu
# with kbench-variants.patch applied — and the variants' PTX from mk.py; the committed PTX is `base`).
# VARS="TAG:SHMULT:PTXNAME ..." (SHMULT: the tile multiple R of an rN variant, else 1);
# KLIST, BLIST and NS filter kernels, block sizes and N (comma-separated, with leading/trailing commas).
# Example: VARS="base:1:base o1u4:1:o1u4 r2:2:r2" KLIST="nbody_step_m4x1," BLIST=",1024," NS=",262144," bash run.sh DIR
set -u
cd "${1:?usage: run.sh DIR}"
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvcc -O2 -o /tmp/kb kbench_exp.cu -lcuda
export KLIST="${KLIST:-nbody_step_m2x4,nbody_step_m4x4,nbody_step_m4x1,}" BLIST="${BLIST:-,512,1024,}" NS="${NS:-,131072,262144,}"
for spec in $VARS; do
  IFS=: read -r tag m f <<< "$spec"
  TAG=$tag SHMULT=$m /tmp/kb "$f.ptx" >> "$out/exp.csv" 2>> "$out/err.txt"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv >> "$out/smi.txt"
