"""``cpfloat``: CPFloat's ``cpfloatf`` (float arrays) and ``cpfloat`` (double arrays), every
deterministic rounding mode, into the formats of fmtsim's ``cpfloat`` profile (the q43 and q52
presets, the IEEE-style E4M3 and E3M4, OCP's FP4/FP6, and the binary16 and bfloat16 presets as the
user formats ``e5m10b15_ieee`` and ``e8m7b127_ieee`` (uint16 codes); fmtsim.profiles.cpfloat says how
each is asked for). bfloat16 under TP and TN is two entry points, from double and from float arrays
(:data:`SAME_RANGE` says why).

CPFloat is C, header-only and LGPL: fmtsim carries none of it. A small C shim of fmtsim's own
(shims/cpfloat_shim.c: it fills CPFloat's option struct and calls it on the array) is compiled on
first use (conformance.shim_build, as C) against the user's copy of CPFloat, whose headers
(``cpfloat_binary32.h``, ``cpfloat_binary64.h`` and what they include) are looked for in
``$CPFLOAT_INCLUDE``, then ``$CPFLOAT_PATH`` (a checkout of
github.com/north-numerical-computing/cpfloat: its ``src/``; or an install prefix: its
``include/``), then the folders of ``$CPATH`` and ``$C_INCLUDE_PATH``, ``/usr/local/include`` and
``/usr/include``. Without them, or without a compiler, the implementation is skipped with the
reason. The shim is built without OpenMP and without PCG (CPFloat then falls back on the C
library's ``rand``, which only its stochastic modes use).

CPFloat returns float (double) values; each is read back as the code of the format that has it
(``codes_of``; -1 where none has it). float16 and bfloat16 inputs are given to ``cpfloatf``
widened exactly to float (NaN payloads kept).

Left out: the stochastic modes (``CPFLOAT_RND_SP``, proportional, and ``SE``, equal
probabilities): their random numbers come from CPFloat's own generator state (PCG or ``rand``,
seeded from the clock), consumed one per element only on some branches, and no values can be
passed in, so a run cannot be reproduced; ``CPFLOAT_SUBN_RND`` (subnormals rounded to the
normal range: fmtsim has no flush-to-normal rule) and the bit-flip (soft error) options; the
wider presets. Its bugs are the named divergences below.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np

from ...formats import Format
from ...profiles.cpfloat import MODES, RECORDS, TARGETS
from ..adapters import Adapter, codes_of
from ..divergences import Divergence
from ..plugin import Implementation, Request
from ..shim_build import ShimUnavailable, build, unavailable

SOURCES = ("float32", "float64", "float16", "bfloat16")
FORMATS = tuple(TARGETS)
_HEADERS = ("cpfloat_binary32.h", "cpfloat_binary64.h", "cpfloat_definitions.h", "cpfloat_docmacros.h",
            "cpfloat_template.h", "cpfloat_threshold_binary32.h", "cpfloat_threshold_binary64.h")


def _candidates() -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    if os.environ.get("CPFLOAT_INCLUDE"):
        out.append((Path(os.environ["CPFLOAT_INCLUDE"]), "$CPFLOAT_INCLUDE"))
    if os.environ.get("CPFLOAT_PATH"):
        root = Path(os.environ["CPFLOAT_PATH"])
        out += [(root / "src", "$CPFLOAT_PATH/src"), (root / "include", "$CPFLOAT_PATH/include"),
                (root, "$CPFLOAT_PATH")]
    for env in ("CPATH", "C_INCLUDE_PATH"):
        out += [(Path(d), f"${env}") for d in os.environ.get(env, "").split(os.pathsep) if d]
    out += [(Path("/usr/local/include"), "/usr/local/include"), (Path("/usr/include"), "/usr/include")]
    return out


def find_include_dir() -> tuple[Path | None, str]:
    """(the folder holding cpfloat_binary32.h and cpfloat_binary64.h, where it came from)."""
    for inc, origin in _candidates():
        if (inc / "cpfloat_binary32.h").is_file() and (inc / "cpfloat_binary64.h").is_file():
            return inc, origin
    return None, ""


def header_version(inc: Path) -> str | None:
    """CPFloat's version as its tree records it (``PackageVersion`` in license.spdx beside or above
    the headers), or None: the headers themselves carry no version."""
    for root in (inc, inc.parent):
        try:
            text = (root / "license.spdx").read_text(errors="replace")
        except OSError:
            continue
        m = re.search(r"^PackageVersion:\s*(\S+)", text, re.M)
        if m:
            return m.group(1)
    return None


@cache
def _lib() -> ctypes.CDLL:
    inc, _ = find_include_dir()
    if inc is None:
        raise ShimUnavailable(
            "cpfloat: CPFloat's headers (cpfloat_binary32.h, cpfloat_binary64.h) were not found: set CPFLOAT_PATH to a "
            "checkout of github.com/north-numerical-computing/cpfloat (or CPFLOAT_INCLUDE to the folder holding them)")
    identity = [inc / h for h in _HEADERS if (inc / h).is_file()]
    lib = build("cpfloat_shim", [inc], identity, what="cpfloat", language="c", compile_flags=("-w",),
                link_flags=("-lm",), symbols=("fmtsim_cpfloat_round",))
    lib.fmtsim_cpfloat_round.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                         ctypes.c_char_p, *([ctypes.c_int] * 7)]
    lib.fmtsim_cpfloat_round.restype = ctypes.c_int
    return lib


def missing() -> str | None:
    """Why the cpfloat implementation cannot run here (None when it can)."""
    return unavailable(_lib)


def _host(x: np.ndarray) -> np.ndarray:
    """``x`` as the array CPFloat rounds: float64 as double, float32 as float, float16 and bfloat16
    widened exactly to float."""
    if x.dtype == ml_dtypes.bfloat16:
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    if x.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(x)
    if x.dtype == np.float16:
        return x.astype(np.float32)
    raise TypeError(f"cpfloat rounds float and double arrays (here float16/bfloat16 widened), not {x.dtype}")


def vendor_round(x: np.ndarray, fmt: str, mode: str) -> np.ndarray:
    """CPFloat's values for the 1-D array ``x`` rounded into ``fmt`` under ``mode`` (a float or
    double array)."""
    t = TARGETS[fmt]
    a = _host(x)
    out = np.empty_like(a)
    status = _lib().fmtsim_cpfloat_round(0 if a.dtype == np.float32 else 1, a.ctypes.data, out.ctypes.data, a.size,
                                          t.preset.encode(), t.precision, t.emin, t.emax, MODES[mode], t.saturation,
                                          t.infinity, 1)
    if status in (-100, -101) or status > 0:
        raise RuntimeError(f"cpfloat refused {fmt} ({t}): status {status}")
    return out


def _encoder(mode: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        rec = next((r for r in RECORDS if r.name == fmt), None)
        return codes_of(vendor_round(x, fmt, mode), rec if rec is not None else fmt)
    return encode


# ---- its bugs: each predicate is the exact set of inputs, from CPFloat's own integer arithmetic ----

def _nan_rounded(mode: str, same_range: bool = False) -> Callable[[np.ndarray, Format], np.ndarray]:
    """NaN inputs whose bit pattern, rounded by ``mode`` as CPFloat rounds a number's (an integer
    addition on the pattern, then a mask), is no longer a NaN. ``same_range``: CPFloat's code for a
    target with the host type's own exponent range (its *_SAME_EXP macros), whose TP and TN add to a
    pattern only when the value compares above (TP) or below (TN) zero, which a NaN never does: a NaN
    is only masked there."""
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        a = _host(x)
        wide = a.dtype == np.float64
        u = np.uint64
        nbits, prec = (64, 53) if wide else (32, 24)
        bits = a.view(np.uint64 if wide else np.uint32).astype(np.uint64)
        full = u((1 << nbits) - 1)
        p = TARGETS[fmt.name].precision
        lead = u(((1 << nbits) - 1) ^ ((1 << (prec - p)) - 1))
        trail = u((1 << (prec - p)) - 1)
        negative = (bits >> u(nbits - 1)) == u(1)
        if same_range and mode in ("rup", "rdn"):
            add = np.zeros(bits.shape, np.uint64)
        elif mode == "rne":
            add = (trail >> u(1)) + ((bits >> u(prec - p)) & u(1))
        elif mode == "rna":
            add = np.full(bits.shape, u(1 << (prec - 1 - p)))
        elif mode == "rnz":
            add = np.full(bits.shape, trail >> u(1))
        elif mode == "rup":
            add = np.where(negative, u(0), trail)
        elif mode == "rdn":
            add = np.where(negative, trail, u(0))
        elif mode == "rtz":
            add = np.zeros(bits.shape, np.uint64)
        else:  # rto truncates and sets the last kept bit where it dropped any: a NaN stays a NaN
            return np.zeros(a.shape, bool)
        with np.errstate(over="ignore"):
            out = ((bits + add) & full) & lead  # CPFloat's unsigned arithmetic wraps
        expo = u(((1 << (nbits - 1)) - 1) ^ ((1 << (prec - 1)) - 1))
        still_nan = ((out & expo) == expo) & ((out & u((1 << (prec - 1)) - 1)) != u(0))
        with np.errstate(invalid="ignore"):
            return np.isnan(a) & ~still_nan
    return expected


def _overflow_nan(mode: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    """The inputs CPFloat's q43 preset sends to NaN under ``mode`` (none under rtz and rto)."""
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        t = TARGETS[fmt.name]
        xmax = 2.0**t.emax * (2 - 2.0 ** (1 - t.precision))
        xbnd = 2.0**t.emax * (2 - 2.0 ** (-t.precision))
        with np.errstate(invalid="ignore", over="ignore"):
            v = _host(x).astype(np.float64)
            if mode in ("rne", "rna"):
                return np.abs(v) >= xbnd
            if mode == "rnz":
                return np.abs(v) > xbnd
            if mode == "rup":
                return v > xmax
            if mode == "rdn":
                return v < -xmax
            return np.zeros(v.shape, bool)
    return expected


_WITH_NAN = tuple(f for f in FORMATS if f in ("e5m2", "e4m3ieee", "e3m4", "e5m10b15_ieee", "e8m7b127_ieee"))
_NAN_TEXT = ("a NaN input's bit pattern is rounded like a number's, by adding to it as an unsigned integer and "
             "masking (CPFloat compares NaN with nothing first): where the addition carries out of the significand "
             "the result is a zero of the other sign, or wraps to a tiny value (0x7FFFFFFF gives -0.0; 0xFFFFFFFF "
             "gives +0), and where the mask clears every payload bit left it is ±Inf (float16 0x7C01, widened "
             "0x7F802000, gives +Inf into E5M2); fmtsim writes the NaN. Under rtz and rto only the clearing can "
             "happen, under rup/rdn the carry for the sign that rounds away.")
_OVERFLOW_TEXT = ("not a bug: the q43 preset's 256 bit patterns are all finite (max 480) and its overflow, with "
                  "infinities off, is a NaN, a 257th value that no byte code holds; these are the inputs CPFloat "
                  "sends to that NaN (rne, rna: |x| >= 496; rnz: |x| > 496; rup: x > 480, +Inf; rdn: x < -480, "
                  "-Inf; rtz and rto clamp to ±480), where the record's profile writes ±480.")


def divergences_for(mode: str, label: str | None = None, same_range: bool = False) -> tuple[Divergence, ...]:
    """The named divergences of the entry point rounding under ``mode`` (``same_range``: the one that
    takes bfloat16 from float arrays, see :data:`SAME_RANGE`)."""
    label = label or f"cpfloat[{mode}]"
    out = [Divergence("cpfloat.nan_payload_rounded", label, _WITH_NAN, SOURCES, _NAN_TEXT,
                      _nan_rounded(mode, same_range)),
           Divergence("cpfloat.e4m3_overflow_nan_has_no_code", label, ("cpfloat_e4m3",), SOURCES, _OVERFLOW_TEXT,
                      _overflow_nan(mode))]
    return tuple(out)


#: CPFloat rounds a float array into a target with float's own exponent range (emax 127, no
#: saturation, infinities: bfloat16) by its *_SAME_EXP macros, and a double array, or any other
#: target, by the *_OTHER_EXP ones. The two differ under TP and TN alone: the SAME_EXP code keeps the
#: sign of a zero (the input -0.0, a negative that rounds to zero: fmtsim's plain ``cpfloat``
#: profile) and only masks a NaN. Those two modes hold bfloat16 by two entry points, split by source.
SAME_RANGE = tuple(f for f, t in TARGETS.items() if t.emax == 127 and not t.saturation and t.infinity)
FLOAT_HOST_SOURCES = ("float32", "float16", "bfloat16")


# one record per name, for the documentation and the registry (each entry point holds its own, whose
# predicate is its mode's)
DIVERGENCES: tuple[Divergence, ...] = tuple(
    Divergence(d.name, "cpfloat", d.formats, d.sources, d.description, d.expected) for d in divergences_for("rup"))


class Cpfloat(Implementation):
    name = "cpfloat"
    summary = ("CPFloat cpfloatf/cpfloat (a C shim built against the user's CPFloat headers), 7 rounding modes, "
               "its 8-bit, FP6/FP4 and binary16 targets")
    install = ("CPFloat's headers (a checkout of github.com/north-numerical-computing/cpfloat named by CPFLOAT_PATH, "
               "or CPFLOAT_INCLUDE) and a C or C++ compiler")
    capabilities = ("encode",)
    profiles = ("cpfloat", "cpfloat_directed")
    checked_with = "CPFloat 0.6.0 (commit 3583976)"
    divergences = DIVERGENCES

    def missing(self) -> str | None:
        return missing()  # its reasons start with "cpfloat:" (shim_build's ``what``)

    def version(self) -> str:
        inc, origin = find_include_dir()
        if inc is None:
            return ""
        v = header_version(inc)
        return f"CPFloat {v or '(version unknown)'} ({origin}: {inc})"

    def profile_version(self) -> str | None:
        inc, _ = find_include_dir()
        return header_version(inc) if inc is not None else None

    def encoders(self, req: Request) -> list[Adapter]:
        out = []
        for mode in MODES:
            directed = mode in ("rup", "rdn")
            profile = "cpfloat_directed" if directed else "cpfloat"
            rest = tuple(f for f in FORMATS if not directed or f not in SAME_RANGE)
            out.append(Adapter(f"cpfloat[{mode}]", _encoder(mode), profile=profile, formats=rest, sources=SOURCES,
                               divergences=divergences_for(mode), options={"rounding": mode}, records=RECORDS))
            if directed and SAME_RANGE:
                out.append(Adapter(f"cpfloat[{mode}] from double", _encoder(mode), profile=profile,
                                   formats=SAME_RANGE, sources=("float64",),
                                   divergences=divergences_for(mode, f"cpfloat[{mode}] from double"),
                                   options={"rounding": mode}, records=RECORDS))
                label = f"cpfloat[{mode}] from float, float's exponent range"
                out.append(Adapter(label, _encoder(mode), profile="cpfloat", formats=SAME_RANGE,
                                   sources=FLOAT_HOST_SOURCES, divergences=divergences_for(mode, label, True),
                                   options={"rounding": mode}, records=RECORDS))
        return out


IMPLEMENTATIONS = [Cpfloat()]
