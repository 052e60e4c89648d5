"""The exact slow twin of the matrix-unit models: Fractions, one output at a time.

Written from the models' descriptions (units.py), not from the fast path: values are
decoded to Fractions, exponents found by exact floor(log2), terms aligned by dividing
by a power of two and truncating, and results rounded by a Fraction rounding. Tests
hold :func:`slow_matmul` equal to :func:`fmtsim.mma.matmul` bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .arith import canonical_operand_format, operand_table
from .units import Unit, get_unit

__all__ = ["slow_matmul", "slow_step", "fl32", "round_fraction", "exact_ieee_sum"]

Value = Fraction | float  # a Fraction, or float nan / +-inf

_ONE = {"e8m0": 127, "ue4m3": 0x38}


def _flog2(v: Fraction) -> int:
    n, d = abs(v.numerator), v.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > abs(v):
        e -= 1
    return e


_IEEE = {"fp32": (np.uint32, np.float32, 23, -126, 128), "fp64": (np.uint64, np.float64, 52, -1022, 1024)}


def _value(code: int, fmt: str) -> Value:
    if fmt in _IEEE:  # an fma unit's fp32 / fp64 pattern: a Python float (keeps -0.0)
        return float(np.array(code, _IEEE[fmt][0]).view(_IEEE[fmt][1]))
    t = operand_table(fmt)
    v = float(t.values[code])
    if math.isnan(v) or math.isinf(v):
        return v
    return Fraction(v)


def _exp(v: Fraction, emin: int) -> int:
    return max(_flog2(v), emin)


def round_fraction(v: Fraction, man: int, emin: int, mode: str) -> Fraction:
    """v onto the grid of a float with ``man`` fraction bits and smallest normal exponent emin."""
    if v == 0:
        return Fraction(0)
    ulp = Fraction(2) ** (max(_flog2(v), emin) - man)
    q = v / ulp
    if mode == "rz":
        r = Fraction(math.trunc(q))
    elif mode == "rd":
        r = Fraction(math.floor(q))
    else:
        r = Fraction(round(q))  # Fraction.__round__ rounds half to even
    return r * ulp


def _to_f32(v: Fraction) -> float:
    """An fp32-grid value as a Python float; +-Inf at or beyond 2^128; +0 for zero."""
    if abs(v) >= Fraction(2) ** 128:
        return math.inf if v > 0 else -math.inf
    return float(np.float32(float(v))) + 0.0


def fl32(x: Value) -> float:
    """x rounded to nearest even fp32 (+-Inf beyond; specials kept)."""
    if isinstance(x, float):
        return x
    r = round_fraction(x, 23, -126, "rne")
    return _to_f32(r)


def _special(terms: list[tuple[Value, ...]], c: Value) -> float | None:
    """IEEE result of a sum of products with C when any factor is NaN/Inf, else None."""
    has_nan, pos, neg = False, False, False
    for factors in terms:
        if any(isinstance(f, float) and math.isnan(f) for f in factors):
            has_nan = True
            continue
        if any(isinstance(f, float) for f in factors):  # an Inf factor
            if any(f == 0 for f in factors):
                has_nan = True
                continue
            sign = 1
            for f in factors:
                sign *= 1 if f > 0 else -1
            pos, neg = pos or sign > 0, neg or sign < 0
    if isinstance(c, float):
        if math.isnan(c):
            has_nan = True
        else:
            pos, neg = pos or c > 0, neg or c < 0
    if has_nan or (pos and neg):
        return math.nan
    if pos:
        return math.inf
    if neg:
        return -math.inf
    return None


def _finite_product(f: tuple[Value, ...]) -> Fraction:
    """|product| of finite factors (0 when any factor is NaN/Inf)."""
    out = Fraction(1)
    for x in f:
        if not isinstance(x, Fraction):
            return Fraction(0)
        out *= abs(x)
    return out


# output -> (fraction bits, rounding, smallest normal exponent, overflow threshold)
_OUT = {"rz_fp32": (23, "rz", -126, 128), "rz_e8m13": (13, "rz", -126, 128), "rne_fp32": (23, "rne", -126, 128),
        "rne_fp16": (10, "rne", -14, 16)}


def _output(v: Fraction, output: str) -> float:
    man, mode, emin, top = _OUT[output]
    r = round_fraction(v, man, emin, mode)
    if abs(r) >= Fraction(2) ** top:
        return math.inf if r > 0 else -math.inf
    return _to_f32(r)


def _ftz_step(unit: Unit, a: list[Value], b: list[Value], c: float, a_emin: int, b_emin: int) -> float:
    """CDNA2 MFMA for one output, in Fractions with an explicit sign for zeros: inputs below
    their format's smallest normal and C below 2^-126 become +0; each product rounded to fp32
    and flushed (keeping its sign), then pairs (fours) added in fp32, each sum flushed."""
    def sv(x: Value, emin: int) -> tuple[Value, bool]:  # (value, is negative zero)
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return x, False
        xf = Fraction(x)
        return (Fraction(0), False) if abs(xf) < Fraction(2) ** emin else (xf, False)

    def mul(x: tuple[Value, bool], y: tuple[Value, bool]) -> tuple[Value, bool]:
        (u, _), (v, _) = x, y
        if isinstance(u, float) or isinstance(v, float):
            with np.errstate(invalid="ignore"):
                return float(np.float32(float(u)) * np.float32(float(v))), False
        p = u * v
        neg = (u < 0) != (v < 0) if p == 0 else False
        neg = neg or (p == 0 and ((u == 0 and v < 0) or (v == 0 and u < 0)))
        r = round_fraction(p, 23, -126, "rne")
        if abs(r) >= Fraction(2) ** 128:
            return (-math.inf if p < 0 else math.inf), False
        if abs(r) < Fraction(2) ** -126:
            return Fraction(0), p < 0 or neg
        return r, False

    def add(x: tuple[Value, bool], y: tuple[Value, bool]) -> tuple[Value, bool]:
        (u, nu), (v, nv) = x, y
        if isinstance(u, float) or isinstance(v, float):
            with np.errstate(invalid="ignore"):
                fu = -0.0 if (not isinstance(u, float) and u == 0 and nu) else float(u)
                fv = -0.0 if (not isinstance(v, float) and v == 0 and nv) else float(v)
                return float(np.float32(fu) + np.float32(fv)), False
        t = u + v
        if t == 0:
            neg = (u == 0 and v == 0 and nu and nv)  # IEEE: an exact zero sum is +0 unless both are -0
            return Fraction(0), neg
        r = round_fraction(t, 23, -126, "rne")
        if abs(r) >= Fraction(2) ** 128:
            return (-math.inf if t < 0 else math.inf), False
        if abs(r) < Fraction(2) ** -126:
            return Fraction(0), t < 0
        return r, False

    A = [sv(x, a_emin) for x in a]
    B = [sv(x, b_emin) for x in b]
    acc: tuple[Value, bool] = sv(c, -126) if not (math.isnan(c) or math.isinf(c)) else (c, False)
    p = [mul(x, y) for x, y in zip(A, B, strict=True)]
    for i in range(0, len(p), unit.k):
        s = add(p[i], p[i + 1])
        if unit.k == 4:
            s = add(s, add(p[i + 2], p[i + 3]))
        acc = add(acc, s)
    v, neg = acc
    if isinstance(v, float):
        return v
    return -0.0 if (v == 0 and neg) else _to_f32(v)


def _fma_exact(x: float, y: float, z: float, fmt: str) -> float:
    """IEEE fma(x, y, z) rounded once to nearest even in ``fmt`` (fp32 / fp64), from the exact
    rational; zero signs and specials by IEEE 754's rules."""
    man, emin, top = _IEEE[fmt][2:]
    vals = (x, y, z)
    if any(math.isnan(v) for v in vals):
        return math.nan
    if math.isinf(x) or math.isinf(y):
        if x == 0 or y == 0:
            return math.nan  # Inf times 0
        pinf = math.copysign(1.0, x) * math.copysign(1.0, y) * math.inf
        if math.isinf(z) and z != pinf:
            return math.nan  # Inf - Inf
        return pinf
    if math.isinf(z):
        return z
    p = Fraction(x) * Fraction(y)
    t = p + Fraction(z)
    if t == 0:
        neg_p = p == 0 and (math.copysign(1.0, x) * math.copysign(1.0, y) < 0)
        both_neg = neg_p and z == 0 and math.copysign(1.0, z) < 0
        return -0.0 if both_neg else 0.0  # exact zero: -0 only as (-0) + (-0)
    r = round_fraction(t, man, emin, "rne")
    if abs(r) >= Fraction(2) ** top:
        return math.inf if t > 0 else -math.inf
    if r == 0:
        return math.copysign(0.0, float(t))  # underflow to zero keeps the sign
    return float(r)


def exact_ieee_sum(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
    """C + sum_k a_k b_k exactly, rounded once (RNE) to fp32 / fp64 (``fmt``): the reference
    answer for the fma units (a, b their bit patterns; NaN / Inf by IEEE rules, NaN as the
    canonical all-ones-but-sign pattern)."""
    udt, fdt = _IEEE[fmt][:2]
    man, emin, top = _IEEE[fmt][2:]
    A = np.asarray(a).astype(udt).view(fdt)
    B = np.asarray(b).astype(udt).view(fdt)
    m, n = A.shape[0], B.shape[1]
    out = np.zeros((m, n), fdt)
    for i in range(m):
        for j in range(n):
            cv = float(c[i, j])
            terms = [(float(x), float(y)) for x, y in zip(A[i], B[:, j], strict=True)]
            sp = _special([(Fraction(x) if math.isfinite(x) else x, Fraction(y) if math.isfinite(y) else y)
                           for x, y in terms], Fraction(cv) if math.isfinite(cv) else cv)
            if sp is not None:
                out[i, j] = sp
                continue
            t = sum((Fraction(x) * Fraction(y) for x, y in terms), Fraction(cv))
            r = round_fraction(t, man, emin, "rne")
            out[i, j] = (math.inf if r > 0 else -math.inf) if abs(r) >= Fraction(2) ** top else float(r)
    bits = out.view(udt).copy()
    bits[np.isnan(out)] = (1 << (8 * np.dtype(udt).itemsize - 1)) - 1
    return bits.view(fdt)


def slow_step(unit: Unit, a: list[Value], b: list[Value], c: float, a_emin: int, b_emin: int,
              sa: list[Value] | None = None, sb: list[Value] | None = None, s_emin: int = 0,
              c_emin: int = -126) -> float:
    """One step of ``unit`` for one output: a, b the step's operand values (Fractions or
    float specials), sa, sb each element's scale value, c the fp32 accumulator (an fp16
    C's exponent clamps at c_emin = -14 when it joins)."""
    if unit.family == "ftz":
        return _ftz_step(unit, a, b, c, a_emin, b_emin)
    if unit.family == "fma":  # one exactly rounded FMA per product, in order
        fmt = unit.formats[0]
        acc = float(c)
        for x, y in zip(a, b, strict=True):
            acc = _fma_exact(float(x), float(y), acc, fmt)
        return acc
    n = len(a)
    sa = sa if sa is not None else [Fraction(1)] * n
    sb = sb if sb is not None else [Fraction(1)] * n
    cv: Value = c if (math.isnan(c) or math.isinf(c)) else Fraction(c)
    factors: list[tuple[Value, ...]] = [(a[i], b[i], sa[i], sb[i]) for i in range(n)]
    if unit.product_overflow_inf:  # a finite product at or beyond 2^128 is +-Inf
        factors = [f + (math.inf,) if _finite_product(f) >= Fraction(2) ** 128 else f for f in factors]
    sp = _special(factors, cv)
    if sp is not None:
        return sp
    A = [Fraction(x) for x in a]
    B = [Fraction(x) for x in b]
    SA = [Fraction(x) for x in sa]
    SB = [Fraction(x) for x in sb]
    C = Fraction(c)
    f = unit.fraction_bits
    if unit.family == "exact":
        return fl32(sum((A[i] * B[i] * SA[i] * SB[i] for i in range(n)), C))
    if unit.family in ("nv", "nv_grouped"):
        terms: list[tuple[Fraction, int]] = []
        if unit.family == "nv":
            for i in range(n):
                p = A[i] * B[i] * SA[i] * SB[i]
                if p == 0:
                    terms.append((p, unit.e_zero))
                else:
                    e = _exp(A[i], a_emin) + _exp(B[i], b_emin) + _exp(SA[i], s_emin) + _exp(SB[i], s_emin)
                    terms.append((p, e))
        else:
            g = unit.group
            for j in range(0, n, g):
                prods = [A[i] * B[i] for i in range(j, j + g)]
                scale = SA[j] * SB[j]
                if all(x == 0 for x in prods) or scale == 0:
                    terms.append((Fraction(0), unit.e_zero))
                else:
                    terms.append((sum(prods, Fraction(0)) * scale, _exp(SA[j], s_emin) + _exp(SB[j], s_emin)))
        terms.append((C, _exp(C, c_emin) if C != 0 else unit.e_zero))
        emax = max(e for _, e in terms)
        unit_lsb = Fraction(2) ** (emax - f)
        s = sum((Fraction(math.trunc(v / unit_lsb)) * unit_lsb for v, _ in terms), Fraction(0))
        return _output(s, unit.output)
    # amd
    idx = [list(range(0, n, 2)), list(range(1, n, 2))] if unit.even_odd else [list(range(n))]
    groups = []
    for ids in idx:
        nz = [(A[i] * B[i], _exp(A[i], a_emin) + _exp(B[i], b_emin)) for i in ids if A[i] * B[i] != 0]
        if not nz:
            continue
        eg = max(e for _, e in nz)
        lsb = Fraction(2) ** (eg - f)
        groups.append((sum((Fraction(math.trunc(p / lsb)) * lsb for p, _ in nz), Fraction(0)), eg))
    ec = _exp(C, -126) if C != 0 else -126
    if groups:
        edot = max(e for _, e in groups)
        lsb = Fraction(2) ** (edot - f)
        sdot = sum((Fraction(math.floor(s / lsb)) * lsb for s, _ in groups), Fraction(0))
        emax = max(edot, ec)
    else:
        sdot, emax = Fraction(0), ec
    f2 = unit.fraction_bits2
    lsb2 = Fraction(2) ** (emax - f2 - 1)
    sdot = Fraction(math.floor(sdot / lsb2)) * lsb2
    lsbc = Fraction(2) ** (emax - f)
    sc = Fraction(math.floor(C / lsbc)) * lsbc
    if unit.drop_small_c and ec < emax - f - 1:
        sc = Fraction(0)
    t = round_fraction(sdot + sc, f2, -126, "rd")
    return _to_f32(round_fraction(t, 23, -126, "rne"))


def _add32(x: float, y: float) -> float:
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
        with np.errstate(invalid="ignore"):
            return float(np.float32(x) + np.float32(y))
    return fl32(Fraction(x) + Fraction(y))


def slow_matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, unit: str | Unit, a_format: str,
                b_format: str, a_scales: np.ndarray | None = None, b_scales: np.ndarray | None = None,
                scale_format: str | None = None, block_size: int | None = None,
                promote_every: int | None = None, split_k: int | Sequence[int] | None = None,
                outputs: list[tuple[int, int]] | None = None, k_order: str = "forward",
                add_c: str = "in_chain") -> np.ndarray:
    """The twin of :func:`fmtsim.mma.matmul` over codes (no tensor objects, no global
    scale), one output at a time; ``outputs`` limits it to those (i, j) (others NaN).
    ``k_order`` and ``add_c`` as matmul's: 'reverse' takes K's steps from the end (each step's
    own columns in order); 'epilogue' chains from 0 and adds C after, one RNE addition in the
    output's format."""
    from .gemm import check_chaining, check_like_matmul, check_names, check_order, operand_format

    u = get_unit(unit)
    check_order(k_order, add_c, u, "slow_matmul")
    block_size = check_names(a_format, b_format, scale_format, block_size, "slow_matmul")
    if a_format is None or b_format is None:
        raise TypeError("slow_matmul: codes need a_format and b_format")
    af, bf = operand_format(a_format, "a_format", "slow_matmul"), operand_format(b_format, "b_format", "slow_matmul")
    A, B = np.asarray(a), np.asarray(b)
    check_chaining(promote_every, split_k, "slow_matmul")
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"slow_matmul: a must be (M, K) and b (K, N); got {A.shape} and {B.shape}")
    if af == "fp32" and u.tf32_inputs:  # a tf32 unit's fp32 operands: the 13 low bits dropped
        A, af = A.astype(np.int64) >> 13, "tf32"
    if bf == "fp32" and u.tf32_inputs:
        B, bf = B.astype(np.int64) >> 13, "tf32"
    fp64 = u.output == "rne_fp64"
    odt = np.float64 if fp64 else np.float32
    m, k = A.shape
    n = B.shape[1]
    if c is not None and np.shape(c) != (m, n):
        raise ValueError(f"slow_matmul: c must have shape {(m, n)}, got {np.shape(c)}")
    for ij in outputs or []:
        if (not isinstance(ij, (tuple, list)) or len(ij) != 2
                or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) and 0 <= t < d
                           for t, d in zip(ij, (m, n), strict=True))):
            raise ValueError(f"slow_matmul: outputs must hold (i, j) pairs with 0 <= i < {m} and 0 <= j < {n}; "
                             f"got {ij!r}")
    check_like_matmul(a, b, c, unit=u, a_format=a_format, b_format=b_format, a_scales=a_scales, b_scales=b_scales,
                      scale_format=scale_format, block_size=block_size, promote_every=promote_every,
                      split_k=split_k, who="slow_matmul")
    step = u.k or k or 1
    if block_size:
        step = math.lcm(step, block_size)
    kp = -(-k // step) * step if k else step
    steps = kp // step

    def source(kk: int) -> int:
        """The column of K whose products the kernel takes kk-th: k_order='reverse' walks the
        steps from the end, each step's own columns in order."""
        return kk if k_order == "forward" else (steps - 1 - kk // step) * step + kk % step

    at = bt = None
    a_emin = b_emin = 0
    if u.family != "fma":
        at, bt = operand_table(af), operand_table(bf)
        a_emin, b_emin = at.emin, bt.emin
    sf = canonical_operand_format(scale_format) if scale_format else None
    st = operand_table(sf) if sf else None

    def scale_of(codes: np.ndarray | None, i: int, kk: int, row: bool) -> Value:
        if codes is None or st is None or block_size is None:
            return Fraction(1)
        j = kk // block_size
        if j >= codes.shape[1 if row else 0]:
            code = _ONE[sf or "e8m0"]
        else:
            code = int(codes[i, j] if row else codes[j, i])
        if sf == "ue4m3":
            code &= 0x7F
        return _value(code, sf or "e8m0")

    def val(t: Any, fmt: str, codes: np.ndarray, i: int, j: int) -> Value:
        return _value(int(codes[i, j]), fmt)

    out = np.full((m, n), np.nan, dtype=odt)
    cc = np.zeros((m, n), odt) if c is None else np.asarray(c, odt)
    add = (lambda x, y: x + y) if fp64 else _add32  # promotion and split-K: one RNE addition
    L = u.k or kp
    if u.family == "exact" and not u.k and (promote_every or split_k):
        L = block_size or 1
    pstep = u.k or L

    def chain(i: int, j: int, c0: float, k0: int, k1: int) -> float:
        acc = c0
        width = u.k or (k1 - k0)
        if width == 0:
            return acc
        for s in range(k0, k1, width):
            ks = [source(kk) for kk in range(s, s + width)]
            av = [val(at, af, A, i, kk) if kk < k else Fraction(0) for kk in ks]
            bv = [_value(int(B[kk, j]), bf) if kk < k else Fraction(0) for kk in ks]
            sa = [scale_of(a_scales, i, kk, True) for kk in ks] if a_scales is not None else None
            sb = [scale_of(b_scales, j, kk, False) for kk in ks] if b_scales is not None else None
            acc = slow_step(u, av, bv, acc, a_emin, b_emin, sa, sb, st.emin if st else 0,
                            u.c_emin if s == k0 else u.out_emin)
        return acc

    if split_k is None:
        edges = [0, kp]
    elif isinstance(split_k, int):
        steps = kp // (pstep if u.k else L)
        unit_w = pstep if u.k else L
        edges = [unit_w * (steps * t // split_k) for t in range(split_k + 1)]
    else:
        edges = [0, *split_k, kp]
    pairs = outputs if outputs is not None else [(i, j) for i in range(m) for j in range(n)]
    for i, j in pairs:
        if k == 0:  # no product: no instruction runs, D is C
            out[i, j] = cc[i, j]
            continue
        total: float | None = None
        for t, (k0, k1) in enumerate(zip(edges, edges[1:], strict=False)):
            if k1 <= k0:
                continue
            start = float(cc[i, j]) if t == 0 and add_c == "in_chain" else 0.0
            if promote_every is None:
                part = chain(i, j, start, k0, k1)
            else:
                part = start
                for q in range(k0, k1, promote_every):
                    part = add(part, chain(i, j, 0.0, q, min(k1, q + promote_every)))
            total = part if total is None else add(total, part)
        assert total is not None
        out[i, j] = add(total, float(cc[i, j])) if add_c == "epilogue" else total
    if fp64:
        bits64 = out.view(np.uint64).copy()
        bits64[np.isnan(out)] = 0x7FFFFFFFFFFFFFFF
        return bits64.view(np.float64)
    bits = out.view(np.uint32).copy()
    sel = np.zeros((m, n), bool)
    for i, j in pairs:
        sel[i, j] = True
    bits[np.isnan(out) & sel] = 0x7FFFFFFF
    return bits.view(np.float32)
