"""The exact slow twin: one value at a time, in rational arithmetic.

Written apart from rounding.py on purpose: it decodes codes straight from
the bit fields, orders every finite value on the real line (not by magnitude
sides), and rounds by comparing Fractions. The fast paths are tested equal to
it; it is too slow for anything but tests, tools and vector generation.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import cache

from .formats import Format, get_format
from .policy import resolve

__all__ = ["value_of", "encode_one", "exact_value"]

_SRC = {"float16": (11, -14), "bfloat16": (8, -126), "float32": (24, -126), "float64": (53, -1022)}


def value_of(code: int, fmt: str | Format) -> Fraction | str:
    """Exact value of ``code``: a Fraction, or 'nan', '+inf', '-inf'. -0 is Fraction(0)."""
    f = get_format(fmt)
    if f.kind == "int":
        c = code - (1 << f.int_bits) if f.signed and code >= 1 << (f.int_bits - 1) else code
        return Fraction(c) * Fraction(2) ** f.scale_exp
    total = (1 if f.signed else 0) + f.exp_bits + f.man_bits
    s = (code >> (total - 1)) & 1 if f.signed else 0
    e = (code >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = code & ((1 << f.man_bits) - 1)
    e_all = e == (1 << f.exp_bits) - 1
    m_all = m == (1 << f.man_bits) - 1
    if f.specials == "fnuz" and s == 1 and e == 0 and m == 0:
        return "nan"
    if f.specials == "ieee" and e_all:
        return "nan" if m else ("-inf" if s else "+inf")
    if f.specials == "fn" and e_all and m_all:
        return "nan"
    if e == 0 and f.subnormals:
        mag = Fraction(m, 2**f.man_bits) * Fraction(2) ** (1 - f.bias)
    else:
        mag = (1 + Fraction(m, 2**f.man_bits)) * Fraction(2) ** (e - f.bias)
    return -mag if s else mag


@cache
def _finite_codes(f: Format, symmetric: bool) -> tuple[tuple[Fraction, int], ...]:
    """(value, code) of every finite code, ascending; -0 is kept apart (see _zero_code)."""
    out = []
    for c in range(f.n_codes):
        v = value_of(c, f)
        if isinstance(v, str):
            continue
        if v == 0 and f.signed and f.kind == "float" and c == 1 << (f.bits - 1):
            continue  # -0: chosen by the sign of the input, not by ordering
        out.append((v, c))
    out.sort()
    if symmetric:
        out = out[1:]  # drop -2^(b-1): the symmetric integer range
    return tuple(out)


@cache
def _sorted_values(f: Format, symmetric: bool) -> list[Fraction]:
    return [v for v, _ in _finite_codes(f, symmetric)]


def _neg_zero_code(f: Format) -> int | None:
    if f.kind == "float" and f.signed and f.specials != "fnuz":
        return 1 << (f.bits - 1)
    return None


def _ulp_beyond(f: Format, v: Fraction) -> Fraction:
    """Distance from the largest finite magnitude to the next value of an unbounded exponent."""
    if f.kind == "int":
        return Fraction(2) ** f.scale_exp
    return Fraction(2) ** (_floor_log2(v) - f.man_bits)


def _quiet_nan(f: Format, negative: bool) -> int:
    if f.specials == "fnuz":
        return 1 << (f.bits - 1)
    sign = (1 << (f.bits - 1)) if (negative and f.signed) else 0
    top = (1 << ((f.bits - 1) if f.signed else f.bits)) - 1
    if f.specials == "ieee":
        return sign | (top & ~((1 << f.man_bits) - 1)) | (1 << (f.man_bits - 1))
    return sign | top


def _canonical_nan(f: Format) -> int:
    """PTX's canonical NaN: positive, every bit below the sign set (FNUZ: 0x80)."""
    if f.specials == "fnuz":
        return 1 << (f.bits - 1)
    return (1 << ((f.bits - 1) if f.signed else f.bits)) - 1


def exact_value(x: float | Fraction) -> Fraction | str:
    """A float as an exact Fraction (or 'nan', '+inf', '-inf'); -0.0 gives '-0'."""
    if isinstance(x, Fraction):
        return x
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "+inf" if x > 0 else "-inf"
    if x == 0 and math.copysign(1.0, x) < 0:
        return "-0"
    return Fraction(x)


def encode_one(
    x: float | Fraction,
    fmt: str | Format,
    rounding: str = "rne",
    overflow: str = "satfinite",
    nan: str | None = None,
    *,
    rbits: int = 0,
    src: str = "float64",
    negative_nan: bool | None = None,
    nan_bits32: int | None = None,
) -> tuple[int, int]:
    """(code, flags) of one value. ``x`` is a Python float (exact) or a Fraction.

    For a NaN input, ``negative_nan`` gives its sign (Python floats lose it
    through some operations); by default it is read from ``x``. ``nan_bits32``
    is its float32 bit pattern, read only by nan='torchao' (default: the quiet NaN).
    """
    pol = resolve(fmt, rounding, overflow, nan)
    f = pol.fmt
    nan_mode = pol.nan
    v = exact_value(x)
    INEXACT, UNDERFLOW, OVERFLOW, INVALID, SATURATED = 1, 2, 4, 16, 32
    finite = _finite_codes(f, pol.overflow == "satsym")
    lo_val, lo_code = finite[0]
    hi_val, hi_code = finite[-1]
    zero_code = next((c for val, c in finite if val == 0), None)

    if f.name == "e8m0":
        if isinstance(v, str) or v <= 0:
            return 0xFF, (0 if v == "nan" else INVALID)
        if v < lo_val:
            return lo_code, INEXACT | UNDERFLOW

    if v == "nan":
        neg = negative_nan if negative_nan is not None else math.copysign(1.0, float(x)) < 0
        if nan_mode == "ml_dtypes" and f.has_nan:
            nan_mode = "signed"
        if nan_mode == "signed":
            return _quiet_nan(f, neg), 0
        if nan_mode == "signed_all_ones":
            if f.specials == "fnuz" or not f.signed:
                return _canonical_nan(f), 0
            return _canonical_nan(f) | (1 << (f.bits - 1) if neg else 0), 0
        if nan_mode == "torchao":  # rounded as +-1.m, m the float32 significand field
            bits = nan_bits32 if nan_bits32 is not None else (0xFFC00000 if neg else 0x7FC00000)
            one_m = (1 + Fraction(bits & 0x7FFFFF, 1 << 23)) * (-1 if bits >> 31 else 1)
            return encode_one(one_m, f, "rne", "satfinite", "zero")[0], INVALID
        if nan_mode == "all_ones":
            ones = (1 << f.bits) - 1
            return (ones if value_of(ones, f) == "nan" else _quiet_nan(f, False)), 0
        if nan_mode == "canonical":
            return _canonical_nan(f), 0
        if nan_mode == "max":
            return hi_code, INVALID
        if nan_mode == "ml_dtypes":
            nz = _neg_zero_code(f)
            assert zero_code is not None
            return (zero_code if neg or nz is None else nz), INVALID
        assert zero_code is not None
        return zero_code, INVALID  # "zero", and "raise" (callers raise before)

    nonsat = pol.overflow == "nonsat"
    if v in ("+inf", "-inf"):
        if v == "-inf" and not f.signed:
            return zero_code, INEXACT | SATURATED  # type: ignore[return-value]
        code_max = hi_code if v == "+inf" else lo_code
        if nonsat and f.has_inf:
            return (min(f.inf_codes) | (0 if v == "+inf" else 1 << (f.bits - 1))), 0
        if nonsat and f.has_nan:
            return _nan_for_overflow(f, nan_mode, v == "-inf"), INVALID
        return code_max, INEXACT | SATURATED

    if v == "-0":
        if nan_mode == "te":  # TransformerEngine's reference FP4 cast writes -0.0 as +0
            return zero_code, 0  # type: ignore[return-value]
        nz = _neg_zero_code(f)
        return (nz if nz is not None else zero_code), 0  # type: ignore[return-value]
    assert isinstance(v, Fraction)

    if v < 0 and not f.signed:
        return zero_code, INEXACT | SATURATED  # type: ignore[return-value]

    vals_sorted = _sorted_values(f, pol.overflow == "satsym")
    k = bisect.bisect_left(vals_sorted, v)
    if k < len(finite) and vals_sorted[k] == v:
        return finite[k][1], 0

    # neighbours on the real line; past either end sits the value an unbounded
    # exponent would have there (code None): landing on it is overflow
    above_top = hi_val + _ulp_beyond(f, hi_val)
    below_bottom = lo_val - _ulp_beyond(f, -lo_val) if lo_val < 0 else None
    pick: tuple[Fraction, int | None]
    mode = pol.rounding
    if v >= above_top or (below_bottom is not None and v <= below_bottom):
        pick = (v, None)
    else:
        down: tuple[Fraction, int | None] = finite[k - 1] if k > 0 else (below_bottom, None)  # type: ignore[assignment]
        up: tuple[Fraction, int | None] = finite[k] if k < len(finite) else (above_top, None)
        toward_zero, away = (down, up) if v > 0 else (up, down)
        if mode == "rtz":
            pick = toward_zero
        elif mode == "rup":
            pick = up
        elif mode == "rdn":
            pick = down
        elif mode in ("rne", "rna"):
            dz = abs(v - toward_zero[0])
            da = abs(away[0] - v)
            if dz != da:
                pick = toward_zero if dz < da else away
            elif mode == "rna":
                pick = away
            else:
                end_code = hi_code if v > 0 else lo_code
                tz_code = toward_zero[1]
                tz_parity = tz_code & 1 if tz_code is not None else 1 - (end_code & 1)
                pick = toward_zero if tz_parity == 0 else away
        elif mode == "sr":
            gap = abs(away[0] - toward_zero[0])
            frac = abs(v - toward_zero[0]) / gap
            prec, emin = _SRC[src]
            ulp = Fraction(2) ** (max(_floor_log2(abs(v)), emin) - (prec - 1))
            d = 0
            while Fraction(2) ** d * ulp < gap:
                d += 1
            d = min(d, 32)
            fint = math.floor(frac * 2**d)
            pick = away if fint + (rbits % (1 << d)) >= (1 << d) else toward_zero
        else:  # pragma: no cover
            raise ValueError(mode)

    flags = INEXACT
    if f.kind == "float" and f.min_normal is not None and 0 < abs(v) < f.min_normal:
        flags |= UNDERFLOW
    if pick[1] is not None:
        nz = _neg_zero_code(f)
        if pick[0] == 0 and v < 0 and nz is not None:
            return nz, flags  # a negative that rounds to zero is -0
        return pick[1], flags
    flags |= OVERFLOW
    positive = v > 0
    toward_finite = mode == "rtz" or (mode == "rup" and not positive) or (mode == "rdn" and positive)
    if nonsat and not toward_finite:
        if f.has_inf:
            return min(f.inf_codes) | (0 if positive else 1 << (f.bits - 1)), flags
        if f.has_nan:
            return _nan_for_overflow(f, nan_mode, not positive), flags
    return (hi_code if positive else lo_code), flags | SATURATED


def _nan_for_overflow(f: Format, nan_mode: str, negative: bool) -> int:
    if nan_mode == "canonical":
        return _canonical_nan(f)
    if nan_mode == "all_ones":
        ones = (1 << f.bits) - 1
        return ones if value_of(ones, f) == "nan" else _quiet_nan(f, False)
    return _quiet_nan(f, negative)


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e
