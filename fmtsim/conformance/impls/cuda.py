"""``cuda``: NVIDIA's own cuda_fp8.h / cuda_fp6.h / cuda_fp4.h host conversion functions, every
entry point (format x overflow mode x rounding mode x source type) held to fmtsim's ``cuda``
profile, and every code decoded.

A small C++ shim (shims/cuda_shim.cpp) is compiled on first use with the system compiler
against the user's CUDA headers and called through ctypes; fmtsim carries none of NVIDIA's
code. Headers are looked for, in order, in ``$CUDA_HOME``/``$CUDA_PATH``, beside ``nvcc``
on PATH (``dirname(nvcc)/../include``), ``/usr/local/cuda/include``, and NVIDIA's pip
wheels (``pip install "fmtsim[cuda]"``: nvidia-cuda-runtime, nvidia-cuda-crt and
nvidia-cuda-cccl, all three needed). Without a compiler or headers the implementation
is skipped with the reason.

Entry points (each is held to ``encode(x, fmt, profile="cuda", overflow=..., rounding=...)``):

    e4m3, e5m2     __nv_cvt_{float,double,halfraw,bfloat16raw}_to_fp8 with __NV_SATFINITE
                   (overflow='satfinite') or __NV_NOSAT ('nonsat'); round to nearest even.
    e2m3, e3m2     __nv_cvt_*_to_fp6 with cudaRoundNearest ('rne') or cudaRoundZero ('rtz');
                   always saturating.
    e2m1           __nv_cvt_*_to_fp4, the same modes.
    e8m0           __nv_cvt_{float,double,bfloat16raw}_to_e8m0 with cudaRoundZero ('rtz') or
                   cudaRoundPosInf ('rup'), __NV_SATFINITE or __NV_NOSAT.

Decodes: __nv_cvt_fp8/fp6/fp4_to_halfraw and __nv_cvt_e8m0_to_bf16raw of every code.
Checked against CUDA 13.0 (V13.0.88) headers.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np

from ...codec import encode
from ..adapters import Adapter
from ..plugin import Decoder, Implementation, Request
from ..shim_build import SOURCE_CODES, ShimUnavailable, build, source_bits, source_name, unavailable

# fmt -> (overflow modes, rounding modes, sources) NVIDIA's functions take
ENTRY_POINTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "e4m3": (("satfinite", "nonsat"), ("rne",), ("float32", "float64", "float16", "bfloat16")),
    "e5m2": (("satfinite", "nonsat"), ("rne",), ("float32", "float64", "float16", "bfloat16")),
    "e2m3": (("satfinite",), ("rne", "rtz"), ("float32", "float64", "float16", "bfloat16")),
    "e3m2": (("satfinite",), ("rne", "rtz"), ("float32", "float64", "float16", "bfloat16")),
    "e2m1": (("satfinite",), ("rne", "rtz"), ("float32", "float64", "float16", "bfloat16")),
    "e8m0": (("satfinite", "nonsat"), ("rtz", "rup"), ("float32", "float64", "bfloat16")),
}
_ROUNDING_CODE = {"rne": 0, "rtz": 1, "rup": 2, "rdn": 3}
_DECODE_KIND = {"e4m3": 0, "e5m2": 1, "e2m3": 2, "e3m2": 3, "e2m1": 4, "e8m0": 5}
_HEADERS = ("cuda_fp8.h", "cuda_fp8.hpp", "cuda_fp6.h", "cuda_fp6.hpp", "cuda_fp4.h", "cuda_fp4.hpp")


def entry_points() -> Iterator[tuple[str, str, str, str]]:
    """(format, overflow, rounding, source) of every NVIDIA conversion function and mode."""
    for fmt, (ovs, rms, srcs) in ENTRY_POINTS.items():
        for ov in ovs:
            for rm in rms:
                for src in srcs:
                    yield fmt, ov, rm, src


def wheel_include_dirs() -> list[Path] | None:
    """Include folders of NVIDIA's pip wheels (runtime + crt + cccl), or None if any is missing."""
    try:
        import nvidia  # namespace package of NVIDIA's wheels
    except ImportError:
        return None
    dirs = []
    for sub in ("cuda_runtime", "cuda_crt", "cuda_cccl"):
        found = None
        for base in getattr(nvidia, "__path__", []):
            for cand in (Path(base) / sub / "include", Path(base) / "cu13" / "include"):
                if cand.is_dir():
                    found = cand
                    break
            if found:
                break
        if found is None:
            return None
        if found not in dirs:
            dirs.append(found)
    return dirs


def find_nvcc() -> str | None:
    """The ``nvcc`` on PATH (beside it are the headers of its toolkit), or None."""
    return shutil.which("nvcc")


def header_version(dirs: list[Path]) -> str | None:
    """CUDART_VERSION of cuda_runtime_api.h in ``dirs`` as 'major.minor', read from the text
    (no compiler needed), or None when no such header or define is there."""
    for d in dirs:
        try:
            text = (d / "cuda_runtime_api.h").read_text(errors="replace")
        except OSError:
            continue
        m = re.search(r"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", text, re.M)
        if m:
            v = int(m.group(1))
            return f"{v // 1000}.{v % 1000 // 10}"
    return None


# cuda_fp6.h, cuda_fp4.h and __nv_cvt_float_to_e8m0 first ship in CUDA 12.8 (its release notes)
MIN_CUDA = "12.8"


def _release(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:2])


def _candidates() -> list[tuple[Path, str]]:
    cands: list[tuple[Path, str]] = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append((Path(os.environ[env]) / "include", f"${env}"))
    nvcc = find_nvcc()
    if nvcc:
        cands.append((Path(nvcc).resolve().parent.parent / "include", f"nvcc at {nvcc}"))
    cands.append((Path("/usr/local/cuda/include"), "/usr/local/cuda"))
    return cands


def older_toolkit() -> tuple[Path, str] | None:
    """(include folder, CUDA version) of a toolkit that has cuda_fp8.h but not cuda_fp4.h: one
    from before CUDA 12.8, named when nothing newer is found."""
    for inc, _origin in _candidates():
        if (inc / "cuda_fp8.h").is_file() and not (inc / "cuda_fp4.h").is_file():
            return inc, header_version([inc]) or "(version unknown)"
    return None


def find_include_dirs() -> tuple[list[Path] | None, str]:
    """(include folders holding cuda_fp8.h and what it needs, where they came from)."""
    for inc, origin in _candidates():
        if (inc / "cuda_fp8.h").is_file() and (inc / "cuda_fp4.h").is_file():
            return [inc], origin
    wheels = wheel_include_dirs()
    if wheels and any((d / "cuda_fp8.h").is_file() for d in wheels):
        return wheels, "NVIDIA pip wheels"
    return None, ""


@cache
def _lib() -> ctypes.CDLL:
    dirs, origin = find_include_dirs()
    if dirs is None:
        old = older_toolkit()
        raise ShimUnavailable(
            "cuda: NVIDIA's headers (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h) were not found"
            + (f" (the CUDA {old[1]} headers at {old[0]} predate CUDA {MIN_CUDA}, where cuda_fp6.h, cuda_fp4.h "
               "and the E8M0 conversions first appear)" if old else "")
            + ": set CUDA_HOME, put nvcc on PATH, or pip install \"fmtsim[cuda]\" (nvidia-cuda-runtime, "
            "nvidia-cuda-crt, nvidia-cuda-cccl)")
    have = header_version(dirs)
    if have is not None and _release(have) < _release(MIN_CUDA):
        raise ShimUnavailable(f"cuda: the headers found ({origin}: {', '.join(map(str, dirs))}) are CUDA {have}; the "
                              f"shim needs CUDA {MIN_CUDA} or later (cuda_fp6.h, cuda_fp4.h and the E8M0 conversions)")
    identity = [d / h for d in dirs for h in _HEADERS if (d / h).is_file()]
    lib = build("cuda_shim", dirs, identity, what="cuda", symbols=("fmtsim_to_fp8", "fmtsim_to_fp6", "fmtsim_to_fp4",
                "fmtsim_to_e8m0", "fmtsim_decode", "fmtsim_cuda_version"))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    u8p = ctypes.POINTER(ctypes.c_uint8)
    lib.fmtsim_to_fp8.argtypes = [ctypes.c_int, vp, u8p, sz, ctypes.c_int, ctypes.c_int]
    lib.fmtsim_to_fp6.argtypes = [ctypes.c_int, vp, u8p, sz, ctypes.c_int, ctypes.c_int]
    lib.fmtsim_to_fp4.argtypes = [ctypes.c_int, vp, u8p, sz, ctypes.c_int]
    lib.fmtsim_to_e8m0.argtypes = [ctypes.c_int, vp, u8p, sz, ctypes.c_int, ctypes.c_int]
    lib.fmtsim_decode.argtypes = [ctypes.c_int, u8p, ctypes.POINTER(ctypes.c_uint16), sz]
    lib.fmtsim_cuda_version.restype = ctypes.c_int
    return lib


def missing() -> str | None:
    """Why the cuda implementation cannot run here (None when it can)."""
    return unavailable(_lib)


def version() -> str:
    """CUDART_VERSION of the headers the shim was built against, as 'major.minor'."""
    v = int(_lib().fmtsim_cuda_version())
    return f"{v // 1000}.{v % 1000 // 10}"


def vendor_encode(x: np.ndarray, fmt: str, overflow: str = "satfinite", rounding: str | None = None) -> np.ndarray:
    """NVIDIA's codes for the 1-D array ``x`` (float32, float64, float16 or bfloat16)."""
    lib = _lib()
    src = source_name(x)
    ovs, rms, srcs = ENTRY_POINTS[fmt]
    rm = rounding or rms[0]
    if overflow not in ovs or rm not in rms or src not in srcs:
        raise ValueError(f"cuda: no NVIDIA conversion into {fmt} from {src} with overflow={overflow!r}, "
                         f"rounding={rm!r}")
    arr = source_bits(x)
    out = np.empty(arr.size, dtype=np.uint8)
    ptr, optr = arr.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
    sat = int(overflow == "satfinite")
    s = SOURCE_CODES[src]
    if fmt in ("e4m3", "e5m2"):
        lib.fmtsim_to_fp8(s, ptr, optr, arr.size, sat, int(fmt == "e5m2"))
    elif fmt in ("e2m3", "e3m2"):
        lib.fmtsim_to_fp6(s, ptr, optr, arr.size, int(fmt == "e3m2"), _ROUNDING_CODE[rm])
    elif fmt == "e2m1":
        lib.fmtsim_to_fp4(s, ptr, optr, arr.size, _ROUNDING_CODE[rm])
    else:
        lib.fmtsim_to_e8m0(s, ptr, optr, arr.size, sat, _ROUNDING_CODE[rm])
    return out


def vendor_decode(fmt: str) -> np.ndarray:
    """NVIDIA's decode of every code of ``fmt``: float16 bits (bfloat16 bits for e8m0)."""
    n = 256 if fmt in ("e4m3", "e5m2", "e8m0") else (64 if fmt in ("e2m3", "e3m2") else 16)
    codes = np.arange(n, dtype=np.uint8)
    out = np.empty(n, dtype=np.uint16)
    _lib().fmtsim_decode(_DECODE_KIND[fmt], codes.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                         out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint16)), n)
    return out


def expected(x: np.ndarray, fmt: str, overflow: str, rounding: str) -> np.ndarray:
    """What fmtsim's ``cuda`` profile says NVIDIA's function gives."""
    return np.asarray(encode(x, fmt, profile="cuda", overflow=overflow, rounding=rounding), np.uint8).reshape(-1)


# ---- the conform implementation -------------------------------------------------------

def _vendor(overflow: str, rounding: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        return vendor_encode(x, fmt, overflow, rounding)
    return encode


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    half = vendor_decode(fmt)[np.asarray(codes, dtype=np.int64)]  # NVIDIA's half / bfloat16 bits
    return half.view(ml_dtypes.bfloat16 if fmt == "e8m0" else np.float16).astype(np.float32)


class Cuda(Implementation):
    name = "cuda"
    summary = "NVIDIA cuda_fp8.h/cuda_fp6.h/cuda_fp4.h host conversions (a shim built against the CUDA headers)"
    install = 'a CUDA toolkit, or pip install "fmtsim[cuda]", and a C++ compiler'
    capabilities = ("decode", "encode")
    profiles = ("cuda",)
    checked_with = "CUDA 13.0 headers"
    divergences = ()  # none found: 0 differences on all 2^32 float32 inputs

    def missing(self) -> str | None:
        return missing()  # its reasons start with "cuda:" (shim_build's ``what``)

    def version(self) -> str:
        return f"CUDA {version()}"

    def profile_version(self) -> str | None:
        return version()  # CUDART_VERSION of the headers the shim was built against

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("cuda", _decode, tuple(ENTRY_POINTS))]

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter(f"cuda[{fmt},{ov},{rm}]", _vendor(ov, rm), profile="cuda", formats=(fmt,), sources=srcs,
                        divergences=(), options={"overflow": ov, "rounding": rm})
                for fmt, (ovs, rms, srcs) in ENTRY_POINTS.items() for ov in ovs for rm in rms]


IMPLEMENTATIONS = [Cuda()]
