#!/usr/bin/env python3
"""Session 6's kernel variants: one PTX per variant from a patched copy of kernels/nbody.cu.

Usage, from the repository root, after `git show 3d72279:kernels/nbody.cu > /tmp/v/nbody.cu`
and `patch /tmp/v/nbody.cu docs/results/2026-12-02-h200/session6/src/nbody-variants.patch`:
    PYTHONPATH= .ci/.venv/bin/python docs/results/2026-12-02-h200/session6/src/mk.py /tmp/v [NAME ...]
writes /tmp/v/NAME.ptx for each variant (all without names), with the pinned NVRTC of
kernels/gen_ptx.py and its options plus the variant's macros.
"""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(REPO / "kernels"))
import gen_ptx  # noqa: E402

VARIANTS = {
    "r1": [], "r2": ["-DNBODY_R=2"], "r4": ["-DNBODY_R=4"],
    "r2np": ["-DNBODY_R=2", "-DNBODY_PREFETCH=0"], "r4np": ["-DNBODY_R=4", "-DNBODY_PREFETCH=0"],
    "u2": ["-DNBODY_UMULT=2"], "u4": ["-DNBODY_UMULT=4"], "u8": ["-DNBODY_UMULT=8"],
    "r2u2": ["-DNBODY_R=2", "-DNBODY_UMULT=2"], "r2u4": ["-DNBODY_R=2", "-DNBODY_UMULT=4"],
    "r4u2": ["-DNBODY_R=4", "-DNBODY_UMULT=2"],
    "o1": ["-DNBODY_ORDER=1"], "o1u2": ["-DNBODY_ORDER=1", "-DNBODY_UMULT=2"],
    "o1u4": ["-DNBODY_ORDER=1", "-DNBODY_UMULT=4"],
}

def main() -> int:
    work = Path(sys.argv[1])
    only = sys.argv[2:]
    nvrtc = gen_ptx.Nvrtc(gen_ptx.find_nvrtc())
    src = (work / "nbody.cu").read_bytes()
    for name, defs in VARIANTS.items():
        if only and name not in only:
            continue
        ptx = nvrtc.compile(src, "nbody.cu", gen_ptx.OPTIONS + tuple(defs))
        (work / f"{name}.ptx").write_bytes(ptx + b"\n")
        print(name, len(ptx))
    return 0

if __name__ == "__main__":
    sys.exit(main())
