#!/usr/bin/env python3
"""Regenerate kernels/nbody.ptx from kernels/nbody.cu with the pinned NVRTC.

NVRTC is the one in the wheel nvidia-cuda-nvrtc-cu11==11.8.89, loaded with ctypes (found through
the installed `nvidia.cuda_nvrtc` package, or at the path in $NBODY_NVRTC_LIB). It emits PTX ISA 7.8
for compute_75, which drivers from R520 on load and JIT for sm_75 and every later GPU.

The output starts with comment lines recording the generator, the source, the SHA-256 of the
source bytes, the NVRTC version and the options. Output is deterministic: two runs give the same
bytes.

Usage (from anywhere; paths are relative to the repository root):
    python3 kernels/gen_ptx.py           # write kernels/nbody.ptx
    python3 kernels/gen_ptx.py --check   # exit 1 if kernels/nbody.ptx is not up to date

Exit status: 0 success; 1 --check found a difference; 2 NVRTC missing, failed or wrong version.
"""

from __future__ import annotations

import argparse
import ctypes
import difflib
import glob
import hashlib
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GENERATOR = "kernels/gen_ptx.py"
SOURCE = "kernels/nbody.cu"
OUTPUT = "kernels/nbody.ptx"
PROGRAM_NAME = "nbody.cu"

# The pinned compiler. Other versions produce other bytes, so they are refused.
NVRTC_VERSION = (11, 8)
NVRTC_WHEEL = "nvidia-cuda-nvrtc-cu11==11.8.89"

# --use_fast_math = -ftz=true -prec-div=false -prec-sqrt=false -fmad=true: rsqrtf becomes one
# rsqrt.approx.ftz.f32, which the inner loop needs (see nbody.cu).
OPTIONS = (
    "--gpu-architecture=compute_75",
    "-std=c++17",
    "--use_fast_math",
)
EXPECTED_PTX_LINES = (".version 7.8", ".target sm_75")
DIFF_HEAD_LINES = 40


class GenError(Exception):
    """NVRTC could not be found, loaded or run, or produced unexpected output."""


def find_nvrtc() -> str:
    """Path of libnvrtc: $NBODY_NVRTC_LIB, else the pinned wheel's library."""
    env = os.environ.get("NBODY_NVRTC_LIB")
    if env:
        if not os.path.isfile(env):
            raise GenError(f"NBODY_NVRTC_LIB={env!r} is not a file")
        return env
    try:
        import nvidia.cuda_nvrtc as pkg  # the pinned wheel's package
    except ImportError as e:
        raise GenError(
            f"cannot import nvidia.cuda_nvrtc ({e}); install {NVRTC_WHEEL} "
            "or set NBODY_NVRTC_LIB to libnvrtc's path"
        ) from None
    tried = []
    for root in list(getattr(pkg, "__path__", [])):
        for pattern in ("lib/libnvrtc.so*", "bin/nvrtc64_*.dll"):
            full = os.path.join(root, pattern)
            tried.append(full)
            hits = sorted(p for p in glob.glob(full) if "builtins" not in os.path.basename(p))
            if hits:
                return hits[0]
    raise GenError("libnvrtc not found; tried: " + ", ".join(tried))


class Nvrtc:
    """The few NVRTC calls we need, through ctypes."""

    def __init__(self, path: str) -> None:
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise GenError(f"cannot load NVRTC from {path}: {e}") from None
        self.path = path
        lib = self.lib
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        lib.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
        lib.nvrtcCreateProgram.argtypes = [
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_char_p),
            ctypes.POINTER(ctypes.c_char_p),
        ]
        lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nvrtcGetPTXSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        lib.nvrtcGetPTX.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        for name in ("nvrtcVersion", "nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetProgramLogSize",
                     "nvrtcGetProgramLog", "nvrtcGetPTXSize", "nvrtcGetPTX", "nvrtcDestroyProgram"):
            getattr(lib, name).restype = ctypes.c_int

    def check(self, code: int, call: str) -> None:
        if code != 0:
            text = self.lib.nvrtcGetErrorString(code)
            raise GenError(f"{call} failed: {code} ({text.decode() if text else 'unknown'})")

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def compile(self, source: bytes, name: str, options: tuple[str, ...]) -> bytes:
        """PTX of `source` (without the trailing NUL); on a compile error GenError with the log."""
        prog = ctypes.c_void_p()
        self.check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source, name.encode(), 0, None, None),
                   "nvrtcCreateProgram")
        try:
            opts = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            result = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            log = self._log(prog)
            if result != 0:
                text = self.lib.nvrtcGetErrorString(result)
                raise GenError(f"NVRTC compile of {SOURCE} failed: {result} "
                               f"({text.decode() if text else 'unknown'})\n--- NVRTC log ---\n{log}")
            if log.strip():
                print(f"NVRTC log for {SOURCE}:\n{log}", file=sys.stderr)
            size = ctypes.c_size_t()
            self.check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
            buf = ctypes.create_string_buffer(size.value)
            self.check(self.lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            return buf.raw.rstrip(b"\0")
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog: ctypes.c_void_p) -> str:
        size = ctypes.c_size_t()
        if self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)) != 0 or size.value <= 1:
            return ""
        buf = ctypes.create_string_buffer(size.value)
        if self.lib.nvrtcGetProgramLog(prog, buf) != 0:
            return ""
        return buf.raw.rstrip(b"\0").decode(errors="replace")


def generate(source_path: Path, allow_other_version: bool) -> bytes:
    """The full text of nbody.ptx: header comments + NVRTC's PTX."""
    source = source_path.read_bytes()
    nvrtc = Nvrtc(find_nvrtc())
    version = nvrtc.version()
    if version != NVRTC_VERSION and not allow_other_version:
        raise GenError(
            f"NVRTC at {nvrtc.path} is {version[0]}.{version[1]}, expected "
            f"{NVRTC_VERSION[0]}.{NVRTC_VERSION[1]} ({NVRTC_WHEEL}); the committed PTX is pinned to it"
        )
    ptx = nvrtc.compile(source, PROGRAM_NAME, OPTIONS)
    lines = ptx.decode().splitlines()
    for expected in EXPECTED_PTX_LINES:
        if expected not in lines:
            raise GenError(f"NVRTC output lacks the line {expected!r}")
    header = [
        f"// Generated by {GENERATOR}; do not edit. Regenerate: python3 {GENERATOR}",
        f"// source: {SOURCE}",
        f"// source-sha256: {hashlib.sha256(source).hexdigest()}",
        f"// nvrtc: {version[0]}.{version[1]}",
        f"// options: {' '.join(OPTIONS)}",
        "//",
    ]
    return ("\n".join(header + lines) + "\n").encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help=f"regenerate in memory and exit 1 if {OUTPUT} differs (writes nothing)")
    ap.add_argument("--allow-other-nvrtc", action="store_true",
                    help="accept an NVRTC other than 11.8 (the output will differ from the committed file)")
    ap.add_argument("--output", type=Path, default=REPO / OUTPUT, help=f"output file (default {OUTPUT})")
    args = ap.parse_args()

    try:
        ptx = generate(REPO / SOURCE, args.allow_other_nvrtc)
    except (GenError, OSError) as e:
        print(f"gen_ptx: error: {e}", file=sys.stderr)
        return 2

    if args.check:
        try:
            committed = args.output.read_bytes()
        except OSError as e:
            print(f"gen_ptx: {OUTPUT} is missing or unreadable ({e}); run: python3 {GENERATOR}", file=sys.stderr)
            return 1
        if committed == ptx:
            print(f"gen_ptx: {OUTPUT} is up to date")
            return 0
        diff = list(difflib.unified_diff(
            committed.decode(errors="replace").splitlines(), ptx.decode().splitlines(),
            fromfile=f"{OUTPUT} (committed)", tofile=f"{OUTPUT} (regenerated from {SOURCE})", lineterm=""))
        print(f"gen_ptx: {OUTPUT} is out of date with {SOURCE}; run: python3 {GENERATOR}", file=sys.stderr)
        print("\n".join(diff[:DIFF_HEAD_LINES]), file=sys.stderr)
        if len(diff) > DIFF_HEAD_LINES:
            print(f"... ({len(diff) - DIFF_HEAD_LINES} more diff lines)", file=sys.stderr)
        return 1

    args.output.write_bytes(ptx)
    print(f"gen_ptx: wrote {args.output} ({len(ptx)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
