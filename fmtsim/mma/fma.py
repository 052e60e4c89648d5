"""The ``fma`` family's numpy path: exactly rounded fused multiply-adds on numpy arrays. The
compiled engine runs the same chain with the CPU's own fused multiply-add (std::fma in
``nv_chain.cpp``); tests/test_mma_compiled.py holds the two equal, and both to the Fraction
rounding, lane by lane.

A unit of the family (NVIDIA fp64 ``mma``, AMD fp32 / fp64 MFMA) computes, for each
output, D = fma(a_k, b_k, D) for k = 0, 1, ..., K-1 in that order, starting from C, each
FMA rounded once to nearest even in the accumulator's format with IEEE 754's gradual
underflow, signed zeros, Inf and NaN: MMA-Sim 2.1.1's ``MMA_FMA`` (arithmetic/fma.py,
which calls std::fma element by element, arithmetic/fma_cpu.cpp). numpy has no fma, so:

fp32 (:func:`fma32`). The product of two fp32 values is exact in float64 (24 + 24 <= 53
bits, exponents within float64's normal range). p + c is then rounded to odd at 53 bits
(the float64 sum s = RN(p + c), its exact error e by TwoSum; where e != 0 s is moved
toward zero if it lies beyond p + c, and its last bit set), and that is rounded to fp32
by numpy's float64 -> float32 cast (RNE, gradual underflow, overflow to Inf). Why this
single rounding is the correct one: rounding to odd at p + k bits and then to nearest at
p bits equals rounding to nearest at p bits directly when k >= 2 (Boldo and Melquiond,
"Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd",
IEEE Trans. Computers 57(4), 2008, Theorem 1); here p <= 24 and the odd rounding keeps 53
bits. No step leaves float64's normal range: every nonzero p + c is a multiple of 2^-298
(the smallest fp32 product) and below 2^257, so s and e are exact doubles and the odd
rounding's grid (2^-52 of the value's binade) is finer by at least 2^29 than the fp32 grid,
subnormal fp32 results included (their grid 2^-149 is coarser still). The midpoint between
the largest fp32 and 2^128 is a 25-bit number, so an odd-rounded value lies on the same
side of it as p + c: overflow to Inf is decided correctly too.

fp64 (:func:`fma64`). Boldo and Melquiond's emulated FMA (same paper, Algorithm 5.4):
(uh, ul) = TwoProduct(a, b) (Dekker's product with Veltkamp's split), (th, tl) =
TwoSum(c, uh), v = RO(tl + ul) (rounded to odd as above), D = RN(th + v). It is proved
for results without underflow, and TwoProduct is exact only when a * b's error term is a
double; so it is used only where |a|, |b| and |uh| lie in [2^-960, 2^995) and |c| < 2^1020,
and either tl = 0 (then D = RN(th + ul) is one IEEE addition of exact terms, correctly
rounded whatever its range) or |th| >= 2^-960 (the result is normal). The lanes outside
(operands near the ends of fp64's range, results that may underflow or overflow) are
rounded exactly in integers (the exact rational a * b + c divided once, CPython's
correctly rounded integer true division): none arise from operands within 2^+-960, so
the integer path runs per element only for such extreme lanes.

Products with a zero factor, and NaN / Inf operands, follow IEEE: D = a * b + c in
floating point (a finite product with an infinite C gives that C).
"""

from __future__ import annotations

import numpy as np

from ..exactfloat import two_product

__all__ = ["fma32", "fma64", "fma"]

_LO, _HI, _C_HI = 2.0**-960, 2.0**995, 2.0**1020


def _two_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, e): s = RN(x + y) and e = x + y - s exactly (Knuth's TwoSum; no overflow)."""
    s = x + y
    yy = s - x
    e = (x - (s - yy)) + (y - yy)
    return s, e


def _round_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """s + e (s = RN(s + e), e its exact error) rounded to odd at 53 bits: s where exact,
    else the one of the two doubles around s + e whose last significand bit is 1."""
    bits = np.ascontiguousarray(s, np.float64).view(np.uint64).copy()
    inexact = e != 0
    # s beyond s + e (e has the other sign): its magnitude one step down is the truncation
    beyond = inexact & ((e < 0) != (s < 0))
    bits -= beyond.astype(np.uint64)
    bits |= inexact.astype(np.uint64)
    return bits.view(np.float64)


def _special(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask, value): lanes with a zero factor or a NaN / Inf operand, and their IEEE result."""
    with np.errstate(invalid="ignore", over="ignore"):
        fin_ab = np.isfinite(a) & np.isfinite(b)
        mask = ~fin_ab | ~np.isfinite(c) | (a == 0) | (b == 0)
        p = a * b  # zero or non-finite factors: exact (0, +-Inf or NaN)
        val = np.where(fin_ab & ~np.isfinite(c), c, p + c)
    return mask, val


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fl32(a * b + c) elementwise (a, b, c float32, broadcast), rounded once (RNE)."""
    with np.errstate(invalid="ignore", over="ignore"):  # a signalling NaN widened raises 'invalid'
        a64, b64, c64 = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
        p = a64 * b64  # exact
        s, e = _two_sum(p, c64)
        ro = _round_odd(np.where(np.isfinite(s), s, 0.0), np.where(np.isfinite(s), e, 0.0))
        out = np.where(np.isfinite(s), ro, s).astype(np.float32)
    return out


def _exact64(a: float, b: float, c: float) -> float:
    """RN(a * b + c) of finite doubles with a nonzero product, exactly in integers."""
    an, ad = a.as_integer_ratio()
    bn, bd = b.as_integer_ratio()
    cn, cd = c.as_integer_ratio()
    num = an * bn * cd + cn * ad * bd
    if num == 0:
        return 0.0  # an exact cancellation of nonzero terms is +0 (round to nearest)
    try:
        return num / (ad * bd * cd)  # int / int: correctly rounded (RNE, gradual underflow)
    except OverflowError:
        return float("inf") if num > 0 else float("-inf")


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """RN(a * b + c) elementwise in fp64 (a, b, c float64, broadcast), rounded once.

    What depends on a or b alone (Veltkamp's split, the range checks) runs on their own
    shapes: in a matmul chain a column of A and a row of B, not the (M, N) outputs."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        # Dekker's TwoProduct: uh + ul = a * b exactly where the operands are safe (below); its
        # splits of a and b run on their own shapes
        uh, ul = two_product(a, b)
        th, tl = _two_sum(c, uh)
        out = np.broadcast_to(th + _round_odd(*_two_sum(tl, ul)), shape).copy()
        ok_a = (np.abs(a) >= _LO) & (np.abs(a) < _HI)  # finite, nonzero, split and product exact
        ok_b = (np.abs(b) >= _LO) & (np.abs(b) < _HI)
        au = np.abs(uh)
        safe = ok_a & ok_b & (au >= _LO) & (au < _C_HI) & (np.abs(c) < _C_HI) & ((tl == 0) | (np.abs(th) >= _LO))
        special = (~np.isfinite(a) | (a == 0)) | (~np.isfinite(b) | (b == 0)) | ~np.isfinite(c)
    special = np.broadcast_to(special, shape)
    if special.any():
        mask, sval = _special(*np.broadcast_arrays(a, b, c))
        out = np.where(mask, sval, out)
    rest = np.nonzero(~np.broadcast_to(safe, shape) & ~special)
    if rest[0].size:
        A, B, C = np.broadcast_arrays(a, b, c)
        out[rest] = [_exact64(float(p), float(q), float(r)) for p, q, r in zip(A[rest], B[rest], C[rest],
                                                                                 strict=True)]
    return out


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """One exactly rounded FMA in C's format (float32 -> :func:`fma32`, float64 -> :func:`fma64`)."""
    return fma64(a, b, c) if np.asarray(c).dtype == np.float64 else fma32(a, b, c)
