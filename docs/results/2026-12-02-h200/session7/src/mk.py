#!/usr/bin/env python3
"""Session 7's kernel variants: one PTX per variant from a patched copy of kernels/nbody.cu.

Usage, from the repository root, after `git show 51fd0fe:kernels/nbody.cu > /tmp/v/nbody.cu`
and `patch /tmp/v/nbody.cu docs/results/2026-12-02-h200/session7/src/nbody-variants.patch`:
    PYTHONPATH= .ci/.venv/bin/python docs/results/2026-12-02-h200/session7/src/mk.py /tmp/v G,O,P ...
writes /tmp/v/gGoOpP.ptx for each spec, with the pinned NVRTC of kernels/gen_ptx.py and its
options plus -DNBODY_GUARD=G -DNBODY_ORDER=O -DNBODY_PTR=P:
  G  the self tiles: 0 every trip guarded (as committed), 1 a warp-uniform branch per trip
     between a guarded and a plain trip (call 1's `oN` rows), 2 a phase loop (plain trips up to
     the warp's own slots, guarded ones over them, plain ones after; one plain trip instance);
  O  m4x1's order in a group of four sources: 0 body by body (as committed), 1 source by source,
     3 diagonal, 4 body by body over pairs of sources, 5 pairs of bodies, 6 bodies in reverse;
  P  1: a trip addresses the tile from a pointer to its first slot (no signed division).
Call 1's `oN` = G 1, O N, P 0; its `before` and call 2's `before` are the committed PTX (51fd0fe).
"""
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(REPO / "kernels"))
import gen_ptx  # noqa: E402


def main() -> int:
    work = Path(sys.argv[1])
    nvrtc = gen_ptx.Nvrtc(gen_ptx.find_nvrtc())
    src = (work / "nbody.cu").read_bytes()
    for spec in sys.argv[2:]:
        g, o, p = spec.split(",")
        defs = (f"-DNBODY_GUARD={g}", f"-DNBODY_ORDER={o}", f"-DNBODY_PTR={p}")
        ptx = nvrtc.compile(src, "nbody.cu", gen_ptx.OPTIONS + defs)
        (work / f"g{g}o{o}p{p}.ptx").write_bytes(ptx + b"\n")
        print(spec, len(ptx))
    return 0


if __name__ == "__main__":
    sys.exit(main())
