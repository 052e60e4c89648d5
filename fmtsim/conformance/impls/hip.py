"""``hip``: AMD's own amd_hip_fp8.h host FP8 conversions, every entry point (format x overflow
mode x source type) held to fmtsim's ``hip`` profile, and every code decoded.

fmtsim carries none of AMD's code. A small C++ shim (shims/hip_shim.cpp) is compiled on
first use with the system compiler against ``hip/amd_detail/amd_hip_fp8.h`` from a ROCm
install found through ``$ROCM_PATH``, ``$HIP_PATH`` or ``/opt/rocm`` (an installed tree's
``include/``, or a checkout of ROCm's ``clr`` repository, whose headers sit under
``hipamd/include/``), and called through ctypes. Without a compiler or headers the
implementation is skipped with the reason.

Entry points: ``__hip_cvt_{float,double,halfraw,bfloat16raw}_to_fp8`` into
``__HIP_E4M3``, ``__HIP_E5M2``, ``__HIP_E4M3_FNUZ`` and ``__HIP_E5M2_FNUZ`` with
``__HIP_SATFINITE`` (overflow='satfinite') or ``__HIP_NOSAT`` ('nonsat'), each held to
``encode(x, fmt, profile="hip", overflow=...)``. Decodes: the float value of every code by
the header's ``internal::cast_from_f8``, which its FP8 types' ``operator float`` calls
(``__hip_cvt_fp8_to_halfraw`` needs hipcc's ``__half_raw``). Checked against ROCm clr
commit f9f995c (2024-10-22, after rocm-6.2.2).
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

from ...codec import encode
from ...formats import Format
from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request
from ..shim_build import SOURCE_CODES, ShimUnavailable, build, source_bits, source_name, unavailable

FORMATS = {"e4m3": 0, "e5m2": 1, "e4m3fnuz": 2, "e5m2fnuz": 3}
SOURCES = ("float32", "float64", "float16", "bfloat16")
OVERFLOWS = ("satfinite", "nonsat")
_HEADER = Path("hip") / "amd_detail" / "amd_hip_fp8.h"
# outside hipcc the header's include chain pulls in the device warp intrinsics, which the host
# compiler lacks; the FP8 host path needs none of them
_DEFINES = ("HIP_INCLUDE_HIP_AMD_DETAIL_WARP_FUNCTIONS_H",)


def find_include_dir() -> tuple[Path | None, str]:
    """(the include folder holding hip/amd_detail/amd_hip_fp8.h, where it came from)."""
    roots: list[tuple[Path, str]] = []
    for env in ("ROCM_PATH", "HIP_PATH"):
        if os.environ.get(env):
            roots.append((Path(os.environ[env]), f"${env}"))
    roots.append((Path("/opt/rocm"), "/opt/rocm"))
    for root, origin in roots:
        for inc in (root / "include", root / "hipamd" / "include"):
            if (inc / _HEADER).is_file():
                return inc, f"{origin} ({inc})"
    return None, ""


def header_version(inc: Path) -> str | None:
    """HIP_VERSION_MAJOR.MINOR.PATCH of ``inc``/hip/hip_version.h, or None: an installed ROCm has
    that header; a checkout of clr has not (the build generates it)."""
    try:
        text = (inc / "hip" / "hip_version.h").read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"^\s*#\s*define\s+HIP_VERSION_{p}\s+(\d+)", text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) if parts[0] and parts[1] else None


@cache
def _lib() -> ctypes.CDLL:
    inc, _ = find_include_dir()
    if inc is None:
        raise ShimUnavailable(
            "hip: AMD's amd_hip_fp8.h was not found: set ROCM_PATH or HIP_PATH to a ROCm install (or a checkout "
            "of ROCm's clr repository), or install ROCm under /opt/rocm")
    identity = [p for p in (inc / "hip" / "amd_detail").glob("*.h")]
    lib = build("hip_shim", [inc], identity, defines=_DEFINES, what="hip",
                symbols=("fmtsim_hip_to_fp8", "fmtsim_hip_decode"))
    lib.fmtsim_hip_to_fp8.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t,
                                      ctypes.c_int, ctypes.c_int]
    lib.fmtsim_hip_decode.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_uint8), ctypes.POINTER(ctypes.c_float),
                                      ctypes.c_size_t]
    return lib


def missing() -> str | None:
    """Why the hip implementation cannot run here (None when it can)."""
    return unavailable(_lib)


def vendor_encode(x: np.ndarray, fmt: str, overflow: str = "satfinite") -> np.ndarray:
    """AMD's codes for the 1-D array ``x`` (float32, float64, float16 or bfloat16)."""
    src = source_name(x)
    if fmt not in FORMATS or overflow not in OVERFLOWS:
        raise ValueError(f"hip: no AMD conversion into {fmt} with overflow={overflow!r}")
    arr = source_bits(x)
    out = np.empty(arr.size, dtype=np.uint8)
    _lib().fmtsim_hip_to_fp8(SOURCE_CODES[src], arr.ctypes.data_as(ctypes.c_void_p),
                             out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), arr.size,
                             int(overflow == "satfinite"), FORMATS[fmt])
    return out


def vendor_decode(fmt: str) -> np.ndarray:
    """AMD's decode of every code of ``fmt``, as float32 bits."""
    codes = np.arange(256, dtype=np.uint8)
    out = np.empty(256, dtype=np.float32)
    _lib().fmtsim_hip_decode(FORMATS[fmt], codes.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                             out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 256)
    return out.view(np.uint32)


def expected(x: np.ndarray, fmt: str, overflow: str) -> np.ndarray:
    """What fmtsim's ``hip`` profile says AMD's function gives."""
    return np.asarray(encode(x, fmt, profile="hip", overflow=overflow), np.uint8).reshape(-1)


# ---- the conform implementation -------------------------------------------------------

def _vendor(overflow: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        return vendor_encode(x, fmt, overflow)
    return encode


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    return vendor_decode(fmt)[np.asarray(codes, dtype=np.int64)].view(np.float32)


def _hip_wide_shift(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Inputs for which AMD's host cast_to_f8 shifts a 64-bit integer by 64 or more bits.

    It builds ``1ull << (mfmt - wm + exponent_diff)`` (mfmt: the source's significand
    bits, 52 for double, 23 for float, which half and bfloat16 go through; wm: the
    format's mantissa bits; exponent_diff = (1 - f8_bias) - the input's unbiased
    exponent, at least 1 - f8_bias + 126 for float subnormals): undefined in C++ once the
    count reaches 64, and on x86 the count wraps."""
    x = np.asarray(x)
    mfmt = 52 if x.dtype == np.float64 else 23
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.abs(x.astype(np.float64))
        _, e = np.frexp(a)
    act = e.astype(np.int64) - 1  # unbiased exponent of a normal input
    if mfmt == 23:  # float subnormals: the header uses the exponent field's 1 - bias
        act = np.maximum(act, -126)
    bias = (1 << (fmt.exp_bits - 1)) - 1 + (1 if fmt.specials == "fnuz" else 0)
    diff = (1 - bias) - act
    return np.isfinite(a) & (a > 0) & (mfmt - fmt.man_bits + diff >= 64)


# this implementation's named divergences (its bugs, each with the exact inputs it concerns)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "hip.shift_of_64_or_more",
        "hip",
        ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"),
        ("float32", "float64", "float16", "bfloat16"),
        "AMD's host cast_to_f8 (amd_hip_fp8.h, from rocBLAS) shifts a 64-bit integer by "
        "mfmt - wm + exponent_diff bits, 64 or more for inputs far below the format's smallest "
        "subnormal (float: |x| < 2^-49 into E4M3; double: |x| < 2^-20): undefined behaviour in "
        "C++; on x86 the count wraps and e.g. float 5.3e-23 gives E4M3 0x01 (exact: 0x00).",
        _hip_wide_shift,
    ),
)


class Hip(Implementation):
    name = "hip"
    summary = "AMD amd_hip_fp8.h host conversions (a shim built against a ROCm tree)"
    install = "a ROCm install (ROCM_PATH, HIP_PATH or /opt/rocm) and a C++ compiler"
    capabilities = ("decode", "encode")
    profiles = ("hip",)
    checked_with = "ROCm clr f9f995c (after rocm-6.2.2)"
    divergences = DIVERGENCES

    def missing(self) -> str | None:
        return missing()  # its reasons start with "hip:" (shim_build's ``what``)

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("hip", _decode, tuple(FORMATS))]

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter(f"hip[{ov}]", _vendor(ov), profile="hip", formats=tuple(FORMATS), sources=SOURCES,
                        divergences=DIVERGENCES, options={"overflow": ov}) for ov in OVERFLOWS]


IMPLEMENTATIONS = [Hip()]
