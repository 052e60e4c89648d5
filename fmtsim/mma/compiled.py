"""The compiled engine of the matrix units: the NVIDIA units' fused steps (family ``nv``), their
block-scaled FP4 steps (``nv_grouped``), AMD CDNA3's FP8 steps and the FMA chains (``fma``,
with the CPU's IEEE fused multiply-add) chained along K in C++ (``nv_chain.cpp``), built on
first use with the system compiler (:mod:`fmtsim.native`) and cached like the conformance
shims.

It computes exactly what :func:`fmtsim.mma.step.nv_step`, :func:`~fmtsim.mma.step.grouped_step`,
:func:`~fmtsim.mma.step.amd_step` and :func:`fmtsim.mma.fma.fma` compute, in integers (and
doubles where they are exact; the FMA chains with std::fma) with the loops running along the
outputs, so that the compiler vectorises them, instead of numpy passes over (rows, cols, K)
slabs. tests/test_mma_compiled.py holds it to the numpy step bit for bit (the numpy step is
held to the Fraction twin in turn). Outputs whose row or column holds a NaN or Inf (a NaN
block scale included), whose C is not finite, or whose result overflows (or, CDNA3, whose
sum reaches 2^53) are flagged by the C++ code and computed by the numpy step; the FMA chains
need no such hand-back (IEEE arithmetic is their rule, NaN payloads aside, which matmul
writes as the canonical NaN).

``matmul(engine=...)`` chooses: "numpy" never compiles, "compiled" requires this engine
(an error says why it is unavailable), "auto" (the default) uses it when it builds.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..native import ENGINES, Library
from .units import Unit

__all__ = ["ENGINES", "available", "unavailable_reason", "chain", "grouped_chain", "grouped_fit", "fma_chain", "covers",
           "check_engine", "uses_compiled", "operands_fit", "narrow_terms", "SIG_LIMIT"]

_OUT = {"rz_fp32": (23, -126, False, 2.0**128), "rz_e8m13": (13, -126, False, 2.0**128),
        "rne_fp32": (23, -126, True, 2.0**128), "rne_fp16": (10, -14, True, 2.0**16)}
SIG_LIMIT = 1 << 15  # |sig_a * sig_b| < 2^30: the C++ product is an int32
_MAX_GROUPS = 8  # nv_chain.cpp's grouped step holds at most 8 groups of one step


def _bind(lib: ctypes.CDLL) -> dict[str, Any]:
    p = ctypes.c_void_p
    i64, i32 = ctypes.c_int64, ctypes.c_int32
    nv, amd = lib.fmtsim_nv_chain, lib.fmtsim_amd_chain
    nv.argtypes = [i64, i64, i64, i64, i64, i64, p, p, p, p, p, p, i32, i32, i32, i32, i32, i32, i32, i32, i32,
                   ctypes.c_double, i32, p, p, p]
    amd.argtypes = [i64, i64, i64, i64, i64, i64, p, p, p, p, p, p, i32, i32, i32, i32, i32, i32, i32, p, p, p]
    grouped = lib.fmtsim_grouped_chain
    grouped.argtypes = [i64, i64, i64, i64, i64, i64, i64, p, p, p, p, p, p, i64, i64, p, p, i32, i32, i32, p, p, p]
    fma32, fma64 = lib.fmtsim_fma32_chain, lib.fmtsim_fma64_chain
    fma32.argtypes = fma64.argtypes = [i64, i64, i64, i64, i64, p, p, p]
    nv.restype = amd.restype = grouped.restype = fma32.restype = fma64.restype = None
    return {"nv": nv, "amd": amd, "grouped": grouped, "fma32": fma32, "fma64": fma64}


_LIBRARY = Library("fmtsim.mma", "nv_chain", "the matrix units' C++ engine",
                   ("fmtsim_nv_chain", "fmtsim_amd_chain", "fmtsim_grouped_chain", "fmtsim_fma32_chain",
                    "fmtsim_fma64_chain"), _bind)


def unavailable_reason() -> str | None:
    """Why the compiled engine cannot be used here (no compiler, a failed build), or None."""
    return _LIBRARY.unavailable_reason()


def available() -> bool:
    return unavailable_reason() is None


def check_engine(engine: Any) -> str:
    return _LIBRARY.check_engine(engine, "matmul")


def covers(unit: Unit) -> bool:
    """Whether the compiled engine has ``unit``'s steps: the nv family, the block-scaled FP4
    units (nv_grouped, rounding toward zero), the FMA chains (fma), and CDNA3's FP8 units (the
    amd family without the fp16/bf16 product-overflow rule)."""
    if unit.family == "nv":
        return unit.output in _OUT
    if unit.family == "fma":  # the CPU's own IEEE fused multiply-add
        return True
    if unit.family == "nv_grouped":  # rounded toward zero in integers; the groups of a step fit its buffers
        return unit.output == "rz_fp32" and unit.k // unit.group <= _MAX_GROUPS
    return unit.family == "amd" and not unit.product_overflow_inf and unit.output == "rne_fp32"


def uses_compiled(unit: Unit, engine: str) -> bool:
    """Whether ``engine`` runs ``unit``'s steps in C++ ('auto': when it builds)."""
    return covers(unit) and _LIBRARY.used(engine)


def _buffers(row_bad: np.ndarray, col_bad: np.ndarray, c: np.ndarray, m: int, n: int) -> tuple[np.ndarray, ...]:
    """What every C++ chain reads and writes besides its operands: the rows / columns to leave
    (uint8), C (float32), and the (m, n) D and bail arrays it fills."""
    return (np.ascontiguousarray(row_bad, np.uint8), np.ascontiguousarray(col_bad, np.uint8),
            np.ascontiguousarray(c, np.float32), np.empty((m, n), np.float32), np.empty((m, n), np.uint8))


def chain(unit: Unit, a_sig: np.ndarray, a_exp: np.ndarray, b_sig: np.ndarray, b_exp: np.ndarray,
          man_a: int, man_b: int, narrow: bool, row_bad: np.ndarray, col_bad: np.ndarray, c: np.ndarray,
          k0: int, k1: int, c_emin: int) -> tuple[np.ndarray, np.ndarray]:
    """(D, bail): C chained through the unit's steps over K columns k0 .. k1 (multiples of
    the unit's K). a_sig, a_exp: (m, K) int32 signed significands and exponents of A; b_sig,
    b_exp: (K, n) of B. narrow: :func:`narrow_terms` of them. row_bad / col_bad: rows of A /
    columns of B to leave (NaN or Inf among k0 .. k1). bail (m, n) bool marks the outputs
    left to the numpy step (their D entry is meaningless)."""
    step = unit.k
    m, k = a_sig.shape
    n = b_sig.shape[1]
    for x in (a_sig, a_exp, b_sig, b_exp):
        assert x.dtype == np.int32 and x.flags.c_contiguous
    rb, cb, c32, out, bail = _buffers(row_bad, col_bad, c, m, n)
    head = (m, n, k, k0 // step, k1 // step, step, a_sig.ctypes.data, a_exp.ctypes.data, b_sig.ctypes.data,
            b_exp.ctypes.data, rb.ctypes.data, cb.ctypes.data, man_a, man_b, unit.fraction_bits)
    tail = (int(narrow), c32.ctypes.data, out.ctypes.data, bail.ctypes.data)
    if unit.family == "nv":
        man, emin, rne, top = _OUT[unit.output]
        _LIBRARY.entry()["nv"](*head, unit.e_zero, c_emin, unit.out_emin, man, emin, int(rne), top, *tail)
    else:
        assert unit.fraction_bits >= man_a + man_b
        _LIBRARY.entry()["amd"](*head, unit.fraction_bits2, 2 if unit.even_odd else 1, int(unit.drop_small_c), *tail)
    return out, bail.astype(bool)


def grouped_chain(unit: Unit, a_val: np.ndarray, b_val: np.ndarray, sa_mag: np.ndarray, sa_exp: np.ndarray,
                  sb_mag: np.ndarray, sb_exp: np.ndarray, block: int, shift: int, row_bad: np.ndarray,
                  col_bad: np.ndarray, c: np.ndarray, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """(D, bail) of an nv_grouped unit over K columns k0 .. k1 (multiples of its K). a_val (m, K),
    b_val (K, n): each element's signed value in units of its format's smallest step; sa_* (m,
    K / block), sb_* (K / block, n): the scales' significands and exponents; shift: F minus the
    fraction bits of a group sum times its scale product (:func:`grouped_fit` checked)."""
    m, k = a_val.shape
    n = b_val.shape[1]
    for x in (a_val, b_val, sa_mag, sa_exp, sb_mag, sb_exp):
        assert x.dtype == np.int32 and x.flags.c_contiguous
    rb, cb, c32, out, bail = _buffers(row_bad, col_bad, c, m, n)
    _LIBRARY.entry()["grouped"](m, n, k, k0 // unit.k, k1 // unit.k, unit.k, unit.group, a_val.ctypes.data,
                                b_val.ctypes.data, sa_mag.ctypes.data, sa_exp.ctypes.data, sb_mag.ctypes.data,
                                sb_exp.ctypes.data, sa_mag.shape[1], block, rb.ctypes.data, cb.ctypes.data,
                                unit.fraction_bits, shift, unit.e_zero, c32.ctypes.data, out.ctypes.data,
                                bail.ctypes.data)
    return out, bail.astype(bool)


def fma_chain(a: np.ndarray, b: np.ndarray, c: np.ndarray, k0: int, k1: int) -> np.ndarray:
    """D = fma(a[:, k], b[k, :], D) for k = k0 .. k1 - 1 in order, from D = c: the fma family's
    chain, in C's float type (float32 or float64; a, b of the same type, (m, K) and (K, n))."""
    dt = np.dtype(c.dtype)
    assert dt in (np.float32, np.float64) and a.dtype == b.dtype == dt
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.array(c, dtype=dt, order="C", copy=True)
    m, k = a.shape
    n = b.shape[1]
    fn = _LIBRARY.entry()["fma32" if dt == np.float32 else "fma64"]
    fn(m, n, k, k0, k1, a.ctypes.data, b.ctypes.data, out.ctypes.data)
    return out


def grouped_fit(unit: Unit, top_a: int, top_b: int, top_sa: int, top_sb: int, shift: int) -> bool:
    """Whether the grouped C++ step holds operands exactly: top_a, top_b, top_sa, top_sb the largest
    element values and scale significands. A group's sum (G products) in int32, its term
    |sum| * scale product << shift in int64, and a step's sum of K / G terms and C's (below
    2^(F + 1)) below 2^63."""
    if shift < 0 or max(top_a, top_b) >= SIG_LIMIT or max(top_sa, top_sb) >= SIG_LIMIT:
        return False
    group_sum = unit.group * top_a * top_b
    term = group_sum * top_sa * top_sb << shift
    return group_sum < 2**31 and (unit.k // unit.group) * term + 2 ** (unit.fraction_bits + 1) < 2**63


def _term_bound(unit: Unit, top_a: int, top_b: int, man_a: int, man_b: int) -> float:
    """A bound on a step's terms: |trunc(p 2^(F - e_max))| <= top_a top_b 2^(F - man_a - man_b),
    top_a, top_b: the largest significand magnitudes of A and B."""
    return top_a * top_b * 2.0 ** (unit.fraction_bits - man_a - man_b)


def narrow_terms(unit: Unit, top_a: int, top_b: int, man_a: int, man_b: int) -> bool:
    """Whether a step's terms and their sum fit int32 (F = 13 FP8, CDNA3 FP8 groups): the C++
    code then sums 32-bit lanes, twice as many per instruction."""
    return unit.k * _term_bound(unit, top_a, top_b, man_a, man_b) < 2.0**31


def operands_fit(unit: Unit, top_a: int, top_b: int, man_a: int, man_b: int) -> bool:
    """Whether the C++ code's arithmetic holds operands whose largest significand magnitudes
    are top_a and top_b exactly: each product of significands in int32, and a step's sum
    (every term below :func:`_term_bound`, C's below 2^(F + 1)) below 2^53, where doubles
    hold it exactly. Both depend on the unit, so they are asked for each unit run."""
    if max(top_a, top_b) >= SIG_LIMIT:
        return False
    return unit.k * _term_bound(unit, top_a, top_b, man_a, man_b) + 2.0 ** (unit.fraction_bits + 1) < 2.0**53
