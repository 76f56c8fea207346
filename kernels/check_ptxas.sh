#!/usr/bin/env bash
# Assemble kernels/nbody.ptx with the pinned ptxas (wheel nvidia-cuda-nvcc-cu12==12.9.86) for every
# architecture we support and print registers / static shared memory / stack / spills per kernel.
#
# Fails (exit 1) on a ptxas error or warning, on any spill store or load, or on a stack frame
# (local memory in the inner loop would cost far more than it saves).
#
# ptxas: $NBODY_PTXAS, else <nvidia.cuda_nvcc package>/bin/ptxas found with ${PYTHON:-python3}.
# Run from anywhere; e.g. `PYTHONPATH=/path/to/wheels bash kernels/check_ptxas.sh`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ptx="$here/nbody.ptx"
archs=(sm_75 sm_80 sm_86 sm_89 sm_90)

if [[ -n "${NBODY_PTXAS:-}" ]]; then
    ptxas="$NBODY_PTXAS"
else
    ptxas="$("${PYTHON:-python3}" -c '
import os, sys
try:
    import nvidia.cuda_nvcc as m
except ImportError as e:
    sys.exit("cannot import nvidia.cuda_nvcc (%s): install nvidia-cuda-nvcc-cu12==12.9.86 or set NBODY_PTXAS" % e)
for root in m.__path__:
    p = os.path.join(root, "bin", "ptxas")
    if os.path.isfile(p):
        print(p)
        break
else:
    sys.exit("no bin/ptxas under %s" % list(m.__path__))
')" || { echo "check_ptxas: ptxas not found" >&2; exit 1; }
fi
if [[ ! -x "$ptxas" ]]; then
    echo "check_ptxas: $ptxas is not an executable file" >&2
    exit 1
fi
if [[ ! -f "$ptx" ]]; then
    echo "check_ptxas: $ptx is missing; run: python3 kernels/gen_ptx.py" >&2
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "ptxas: $ptxas ($("$ptxas" --version | tail -n 1))"
echo "ptx:   $ptx"
printf '%-16s %-6s %5s %11s %6s %12s %11s\n' kernel arch regs smem_static stack spill_stores spill_loads

fail=0
for arch in "${archs[@]}"; do
    log="$tmp/$arch.log"
    if ! "$ptxas" -arch="$arch" -v -o "$tmp/$arch.cubin" "$ptx" >"$log" 2>&1; then
        echo "check_ptxas: ptxas failed for $arch:" >&2
        cat "$log" >&2
        fail=1
        continue
    fi
    if grep -qi 'warning' "$log"; then
        echo "check_ptxas: ptxas warned for $arch:" >&2
        grep -i 'warning' "$log" >&2
        fail=1
    fi
    # ptxas -v prints, per entry function:
    #   Compiling entry function 'NAME' for 'sm_XX'
    #   N bytes stack frame, N bytes spill stores, N bytes spill loads
    #   Used N registers, [N bytes smem,] ...
    # shellcheck disable=SC2016
    if ! awk -v arch="$arch" '
        /Compiling entry function/ { match($0, /\x27[^\x27]+\x27/); name = substr($0, RSTART + 1, RLENGTH - 2) }
        /bytes stack frame/ {
            stack = $1
            for (i = 1; i <= NF; i++) {
                if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^stores/) st = $i
                if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) ~ /^loads/) ld = $i
            }
        }
        /Used [0-9]+ registers/ {
            regs = ""; smem = 0
            for (i = 1; i <= NF; i++) {
                if ($i == "Used") regs = $(i + 1)
                if ($(i + 1) == "bytes" && $(i + 2) ~ /^smem/) smem = $i
            }
            printf "%-16s %-6s %5s %11s %6s %12s %11s\n", name, arch, regs, smem, stack, st, ld
            seen++
            if (st + 0 > 0 || ld + 0 > 0 || stack + 0 > 0) bad = 1
        }
        END { if (seen == 0) { print "no kernels found in ptxas output" > "/dev/stderr"; exit 1 } exit bad }
    ' "$log"; then
        fail=1
    fi
done

if [[ $fail -ne 0 ]]; then
    echo "check_ptxas: FAILED (ptxas error/warning, spills or a stack frame above)" >&2
    exit 1
fi
echo "check_ptxas: ok (${#archs[@]} architectures, no spills, no stack)"
