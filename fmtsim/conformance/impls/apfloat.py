"""``apfloat``: LLVM's APFloat (what MLIR-based compilers use when they constant-fold a cast).

A small C++ shim (below; fmtsim's own code) is compiled with the system C++ compiler against
the LLVM found through ``llvm-config`` on first use and cached per user (conformance.shim_build:
``$FMTSIM_CACHE``, ``$XDG_CACHE_HOME/fmtsim`` or ``~/.cache/fmtsim``), then loaded with ctypes.
``APFloat::convert`` from IEEE single, double, half and bfloat16 into Float8E4M3FN, Float8E5M2,
Float8E4M3FNUZ, Float8E5M2FNUZ, Float6E3M2FN, Float6E2M3FN, Float4E2M1FN (LLVM 19 and newer)
and Float8E8M0FNU (LLVM 20 and newer), under each of its five rounding modes, is held to
fmtsim's ``apfloat`` profile with that rounding mode, codes and status flags (opStatus:
invalid, overflow, underflow, inexact, against ``encode_with_flags``); every code converted
back to IEEE single is checked against fmtsim.decode.

``llvm-config`` is looked for as ``$FMTSIM_LLVM_CONFIG``, then ``llvm-config-NN`` and
``/usr/lib/llvm-NN/bin/llvm-config`` for NN from 30 down to 19, then ``llvm-config``; the first
of LLVM 19 or newer is used (Debian/Ubuntu: ``apt-get install llvm-19-dev``).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np

from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request
from ..shim_build import ShimUnavailable, build, find_compiler, source_name

# fmtsim format -> (APFloat semantics, first LLVM major that has it)
SEMANTICS = {"e4m3": ("Float8E4M3FN", 16), "e5m2": ("Float8E5M2", 16), "e4m3fnuz": ("Float8E4M3FNUZ", 16),
             "e5m2fnuz": ("Float8E5M2FNUZ", 16), "e3m2": ("Float6E3M2FN", 19), "e2m3": ("Float6E2M3FN", 19),
             "e2m1": ("Float4E2M1FN", 19), "e8m0": ("Float8E8M0FNU", 20)}
MODES = {"rne": "rmNearestTiesToEven", "rtz": "rmTowardZero", "rup": "rmTowardPositive",
         "rdn": "rmTowardNegative", "rna": "rmNearestTiesToAway"}
SOURCES = {"float32": (0, "IEEEsingle", 32), "float64": (1, "IEEEdouble", 64), "float16": (2, "IEEEhalf", 16),
           "bfloat16": (3, "BFloat", 16)}
MIN_MAJOR = 19


def _shim_source() -> str:
    fmt_cases = "\n".join(
        f"#if LLVM_VERSION_MAJOR >= {since}\n    case {i}: return &APFloat::{name}();\n#endif"
        for i, (name, since) in enumerate(SEMANTICS.values()))
    mode_cases = "\n".join(f"    case {i}: return APFloat::{m};" for i, m in enumerate(MODES.values()))
    src_cases = "\n".join(f"    case {k}: return &APFloat::{name}();" for k, name, _ in SOURCES.values())
    return f"""// fmtsim's APFloat shim: element-wise APFloat::convert for ctypes.
#include <cstdint>
#include <cstring>
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/APInt.h"
#include "llvm/Config/llvm-config.h"
using namespace llvm;

static const fltSemantics *target(int f) {{
  switch (f) {{
{fmt_cases}
    default: return nullptr;
  }}
}}
static APFloat::roundingMode mode(int m) {{
  switch (m) {{
{mode_cases}
    default: return APFloat::rmNearestTiesToEven;
  }}
}}
static const fltSemantics *source(int s) {{
  switch (s) {{
{src_cases}
    default: return nullptr;
  }}
}}

extern "C" const char *fmtsim_apfloat_version() {{ return LLVM_VERSION_STRING; }}
extern "C" int fmtsim_apfloat_has(int f) {{ return target(f) != nullptr; }}

// in: n values of the source type's width; out: codes; status: APFloat::opStatus bits
extern "C" int fmtsim_apfloat_encode(int s, const void *in, long n, int f, int m, uint8_t *out, uint8_t *status) {{
  const fltSemantics *from = source(s), *to = target(f);
  if (!from || !to) return -1;
  unsigned width = APFloat::getSizeInBits(*from);
  for (long i = 0; i < n; ++i) {{
    uint64_t raw = 0;
    std::memcpy(&raw, static_cast<const char *>(in) + i * (width / 8), width / 8);
    APFloat v(*from, APInt(width, raw));
    bool loses = false;
    status[i] = static_cast<uint8_t>(v.convert(*to, mode(m), &loses));
    out[i] = static_cast<uint8_t>(v.bitcastToAPInt().getZExtValue());
  }}
  return 0;
}}

extern "C" int fmtsim_apfloat_decode(int f, const uint8_t *codes, long n, uint32_t *out) {{
  const fltSemantics *from = target(f);
  if (!from) return -1;
  unsigned width = APFloat::getSizeInBits(*from);
  for (long i = 0; i < n; ++i) {{
    APFloat v(*from, APInt(width, codes[i]));
    bool loses = false;
    v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &loses);
    out[i] = static_cast<uint32_t>(v.bitcastToAPInt().getZExtValue());
  }}
  return 0;
}}
"""


def _version(config: str) -> str | None:
    """``config --version`` ("22.1.8"), or None when it does not run or says no version."""
    try:
        out = subprocess.run([config, "--version"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if text[:1].isdigit() else None


def _major(config: str) -> int | None:
    version = _version(config)
    try:
        return int(version.split(".")[0]) if version else None
    except ValueError:
        return None


def llvm_version(config: str) -> str | None:
    """The LLVM version ``config`` (an llvm-config) reports, e.g. '19.1.7'; None if it says none."""
    return _version(config)


def llvm_config_candidates() -> list[str]:
    """The llvm-config programs there are besides ``$FMTSIM_LLVM_CONFIG``, in the order
    :func:`find_llvm_config` tries them: ``llvm-config-NN`` on PATH and
    ``/usr/lib/llvm-NN/bin/llvm-config`` for NN from 30 down to 19, then ``llvm-config``."""
    candidates = []
    for nn in range(30, MIN_MAJOR - 1, -1):
        candidates += [shutil.which(f"llvm-config-{nn}") or "", f"/usr/lib/llvm-{nn}/bin/llvm-config"]
    candidates.append(shutil.which("llvm-config") or "")
    return [c for c in dict.fromkeys(candidates) if c and os.path.exists(c)]


def find_llvm_config() -> tuple[str | None, str]:
    """(path of an llvm-config of LLVM 19 or newer, or None; what was found, for the reason)."""
    seen = []
    for c in [os.environ.get("FMTSIM_LLVM_CONFIG", ""), *llvm_config_candidates()]:
        if not c or not os.path.exists(c):
            continue
        major = _major(c)
        if major is None:
            continue
        if major >= MIN_MAJOR:
            return c, ""
        seen.append(f"{c} is LLVM {major}")
    return None, "; ".join(seen)


_LIB: list[ctypes.CDLL] = []


def library() -> ctypes.CDLL:
    """The compiled shim (built on first use, cached per user and per LLVM: shim_build)."""
    if _LIB:
        return _LIB[0]
    config, _ = find_llvm_config()
    if config is None:
        raise ShimUnavailable("apfloat: no llvm-config of LLVM 19 or newer")

    def ask(*args: str) -> list[str]:
        return subprocess.run([config, *args], capture_output=True, text=True, check=True).stdout.split()

    libdir = ask("--libdir")[0]
    handle = build("apfloat_shim", [], [], what="apfloat", source=_shim_source().encode(),
                   compile_flags=tuple(ask("--cxxflags")),
                   link_flags=(*ask("--ldflags"), *ask("--libs", "support"), *ask("--system-libs"),
                               f"-Wl,-rpath,{libdir}"),
                   identity_text=" ".join([config, *ask("--version")]),
                   symbols=("fmtsim_apfloat_version", "fmtsim_apfloat_encode", "fmtsim_apfloat_decode"))
    handle.fmtsim_apfloat_version.restype = ctypes.c_char_p
    handle.fmtsim_apfloat_encode.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_int,
                                             ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    handle.fmtsim_apfloat_decode.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    _LIB.append(handle)
    return handle


def _fmt_index(fmt: str) -> int:
    return list(SEMANTICS).index(fmt)


def encode_with_status(x: np.ndarray, fmt: str, rounding: str = "rne") -> tuple[np.ndarray, np.ndarray]:
    """APFloat's codes and opStatus bits (1 invalid, 2 divide-by-zero, 4 overflow, 8 underflow,
    16 inexact) for ``x`` converted into ``fmt``."""
    lib = library()
    x = np.ascontiguousarray(x)
    out = np.zeros(x.size, np.uint8)
    status = np.zeros(x.size, np.uint8)
    rc = lib.fmtsim_apfloat_encode(SOURCES[source_name(x)][0], x.ctypes.data, x.size, _fmt_index(fmt),
                                   list(MODES).index(rounding), out.ctypes.data, status.ctypes.data)
    if rc != 0:
        raise RuntimeError(f"this LLVM's APFloat has no {SEMANTICS[fmt][0]}")
    return out, status


def _encoder(rounding: str) -> Callable[[np.ndarray, str], np.ndarray]:
    return lambda x, fmt: encode_with_status(x, fmt, rounding)[0]


# APFloat's opStatus bits -> fmtsim's flag bits (encode_with_flags): invalid, overflow,
# underflow, inexact (divide-by-zero cannot come from a conversion; fmtsim's 'saturated' has no
# APFloat counterpart and is not compared)
_STATUS_TO_FLAGS = ((1, 16), (4, 4), (8, 2), (16, 1))
FLAG_BITS = 16 | 4 | 2 | 1


def status_as_flags(status: np.ndarray) -> np.ndarray:
    """APFloat opStatus bits as fmtsim's flag bits."""
    st = np.asarray(status, dtype=np.uint8)
    out = np.zeros(st.shape, np.uint8)
    for ap, ours in _STATUS_TO_FLAGS:
        out |= np.where(st & ap, ours, 0).astype(np.uint8)
    return out


def _with_flags(rounding: str) -> Callable[[np.ndarray, str], tuple[np.ndarray, np.ndarray]]:
    def run(x: np.ndarray, fmt: str) -> tuple[np.ndarray, np.ndarray]:
        codes, status = encode_with_status(x, fmt, rounding)
        return codes, status_as_flags(status)
    return run


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    lib = library()
    c = np.ascontiguousarray(codes, dtype=np.uint8)
    out = np.zeros(c.size, np.uint32)
    if lib.fmtsim_apfloat_decode(_fmt_index(fmt), c.ctypes.data, c.size, out.ctypes.data) != 0:
        raise RuntimeError(f"this LLVM's APFloat has no {SEMANTICS[fmt][0]}")
    return out.view(np.float32)


def _code_ff(codes: np.ndarray, fmt: Any) -> np.ndarray:
    return np.asarray(codes) == 0xFF


# LLVM 20+ decodes E8M0's NaN code 0xFF as +Inf (its Float8E8M0FNU semantics have no
# infinity and one NaN, 0xFF; APFloat::convert back to IEEE single gives 0x7F800000)
DIVERGENCES = (
    Divergence("apfloat.e8m0_ff_decodes_inf", "apfloat", ("e8m0",), ("codes",),
               "LLVM 20+ (read off 22.1.8) converts the E8M0 NaN code 0xFF to IEEE single +Inf "
               "(0x7F800000), not a NaN; every other code decodes to its power of two", _code_ff),
)


class Apfloat(Implementation):
    name = "apfloat"
    aliases = ("llvm",)
    summary = "LLVM APFloat::convert (C++ shim built against llvm-config), all five rounding modes"
    install = "apt-get install llvm-19-dev (or newer), and a C++ compiler"
    capabilities = ("decode", "encode")
    profiles = ("apfloat",)
    checked_with = "LLVM 19.1.7 and 22.1.8 (Debian llvm-19-dev, llvm-22-dev)"
    divergences = DIVERGENCES

    def missing(self) -> str | None:
        config, seen = find_llvm_config()
        if config is None:
            found = f" ({seen})" if seen else ""
            return f"apfloat: no llvm-config of LLVM {MIN_MAJOR} or newer found{found} ({self.install})"
        if find_compiler() is None:
            return "apfloat: no C++ compiler found (g++, c++ or clang++; or set CXX)"
        return None

    def version(self) -> str:
        return f"LLVM {library().fmtsim_apfloat_version().decode()}"

    def profile_version(self) -> str | None:
        config, _ = find_llvm_config()
        return _version(config) if config else None

    def _formats(self) -> tuple[str, ...]:
        config, _ = find_llvm_config()
        major = _major(config) if config else None
        return tuple(f for f, (_, since) in SEMANTICS.items() if major is None or major >= since)

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("apfloat", _decode, self._formats(), divergences=DIVERGENCES)]

    def encoders(self, req: Request) -> list[Adapter]:
        formats = self._formats() if not req.recorded and self.missing() is None else tuple(SEMANTICS)
        return [Adapter(f"apfloat[{r}]", _encoder(r), profile="apfloat", formats=formats,
                        sources=tuple(SOURCES), options={"rounding": r}, with_flags=_with_flags(r),
                        flag_bits=FLAG_BITS)
                for r in MODES]


IMPLEMENTATIONS = [Apfloat()]
