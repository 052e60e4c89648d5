"""Numbers written as text, read exactly: what ``fmtsim encode`` and ``fmtsim diff`` take.

One grammar for every number typed on the command line. Accepted spellings (case-insensitive,
an optional leading ``+`` or ``-`` on each; ASCII digits only):

    integer      123, 0017 (decimal: leading zeros do not make it octal), 0x1F, 0o17, 0b1011
    decimal      -0.5, .5, 1e-3, 6.02E+23, 0001.5000
    hex float    0x1.8p3, -0x.Cp-2, 0x1p-149 (C99; the exponent is optional)
    rational     1/3, -7/2
    special      nan, inf, infinity

and, as in Python literals, single underscores between digits (or right after a 0x/0o/0b
prefix): 1_000, 0x_7f, 0b1000_0000, 1_000.000_1e1_0. ``fmtsim encode`` and ``fmtsim diff``
take any of them (:func:`parse_number`); ``fmtsim decode`` takes the integer forms
(:func:`parse_integer`), so a code is read the same way by both.

Every finite number becomes a ``fractions.Fraction`` equal to what was written, digit for digit
(hex floats too: Python's ``float.fromhex`` would round them to float64 first). Every spelling of
negative zero (``-0``, ``-0.00``, ``-0e5``, ``-0x0p0``, ``-0/5``) is the float ``-0.0``, since a
Fraction has no sign of zero. Numbers beyond ``2^±LIMIT_EXP`` are replaced by ``±2^±LIMIT_EXP``:
every format's range, every rounding boundary and every source type (float64 included) lies far
inside that, so the answer is the same, and ``1e999999999`` is decided at once instead of
expanding ten to the billionth power. Digit strings of any length are read (Python's limit on
int-from-string conversions is lifted for the parse).
"""

from __future__ import annotations

import math
import re
import sys
from fractions import Fraction

import numpy as np

__all__ = ["LIMIT_EXP", "parse_number", "parse_integer", "round_to_float"]

# 2^2048 is above float64's largest value (2^1024) and every format's; 2^-2048 below the smallest
# float64 subnormal (2^-1074) and every format's smallest step
LIMIT_EXP = 2048
_HUGE = Fraction(2) ** LIMIT_EXP
_TINY = Fraction(1, 2**LIMIT_EXP)
# 10^617 > 2^2048 and 10^-617 < 2^-2048: decimal exponents past these are decided without arithmetic
_DEC_LIMIT = 617

# digit runs with single underscores between digits, as Python literals allow
_D = r"\d(?:_?\d)*"
_X = r"[0-9a-f](?:_?[0-9a-f])*"
_DEC = re.compile(rf"(?P<int>{_D})?(?:\.(?P<frac>{_D})?)?(?:e(?P<exp>[+-]?{_D}))?", re.ASCII)
_HEX = re.compile(rf"0x_?(?P<int>{_X})?(?:\.(?P<frac>{_X})?)?(?:p(?P<exp>[+-]?{_D}))?", re.ASCII)
_RAT = re.compile(rf"(?P<num>{_D})/(?P<den>{_D})", re.ASCII)
_INT = re.compile(rf"(?:0x_?(?P<hex>{_X})|0o_?(?P<oct>[0-7](?:_?[0-7])*)|0b_?(?P<bin>[01](?:_?[01])*)|(?P<dec>{_D}))",
                  re.ASCII)
_INTEGER_FORMS = "an integer: decimal, 0x.. hex, 0o.. octal or 0b.. binary, underscores between digits allowed"


class _Unbounded:
    """Lift the int/str conversion digit limit (Python >= 3.11) for one parse."""

    def __enter__(self) -> None:
        self.old = getattr(sys, "get_int_max_str_digits", lambda: 0)()
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(0)

    def __exit__(self, *exc: object) -> None:
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(self.old)


def _clamp(mag: Fraction) -> Fraction:
    return _HUGE if mag > _HUGE else _TINY if 0 < mag < _TINY else mag


def _scaled(mantissa: int, exp: int, base: int, digits_of_mantissa: int) -> Fraction:
    """mantissa * base^exp, clamped; decided from the exponent alone when it is far out."""
    if mantissa == 0:
        return Fraction(0)
    # base^(exp + digits - 1) <= value < base^(exp + digits)
    magnitude = exp + digits_of_mantissa
    limit = _DEC_LIMIT if base == 10 else LIMIT_EXP
    if magnitude - 1 > limit:
        return _HUGE
    if magnitude < -limit:
        return _TINY
    v = Fraction(mantissa) * Fraction(base) ** exp
    return _clamp(v)


def _exponent(text: str | None) -> int | None:
    """The exponent's value; None when it has so many digits that only its sign matters."""
    if not text:
        return 0
    text = text.replace("_", "")
    digits = text.lstrip("+-").lstrip("0")
    if len(digits) > 18:
        return None
    return int(text)


def _unsigned(t: str) -> Fraction | float | None:
    if t in ("nan",):
        return math.nan
    if t in ("inf", "infinity"):
        return math.inf
    m = _INT.fullmatch(t)
    if m and not m["dec"]:  # 0o / 0b integers (0x ones are hex floats without a point, below)
        if m["oct"] or m["bin"]:
            return _clamp(Fraction(_integer(m)))
    m = _HEX.fullmatch(t)
    if m and (m["int"] or m["frac"]):
        frac = (m["frac"] or "").replace("_", "")
        mant = int((m["int"] or "").replace("_", "") + frac or "0", 16)
        exp = _exponent(m["exp"])
        if exp is None:
            return Fraction(0) if mant == 0 else (_HUGE if not m["exp"].startswith("-") else _TINY)
        return _scaled(mant, exp - 4 * len(frac), 2, mant.bit_length())
    m = _DEC.fullmatch(t)
    if m and (m["int"] or m["frac"]):
        frac = (m["frac"] or "").replace("_", "")
        digits = ((m["int"] or "").replace("_", "") + frac).lstrip("0")
        mant = int(digits or "0")
        exp = _exponent(m["exp"])
        if exp is None:
            return Fraction(0) if mant == 0 else (_HUGE if not m["exp"].startswith("-") else _TINY)
        return _scaled(mant, exp - len(frac), 10, len(digits))
    m = _RAT.fullmatch(t)
    if m:
        den = int(m["den"].replace("_", ""))
        if den == 0:
            raise ValueError(f"zero denominator in {t!r}")
        return _clamp(Fraction(int(m["num"].replace("_", "")), den))
    return None


def _integer(m: re.Match[str]) -> int:
    for group, base in (("hex", 16), ("oct", 8), ("bin", 2), ("dec", 10)):
        if m[group]:
            return int(m[group].replace("_", ""), base)
    raise AssertionError(m)


def parse_integer(text: str) -> int:
    """The integer ``text`` spells in the integer forms of the module's grammar (what ``fmtsim
    decode`` takes as a code); ValueError naming the text otherwise."""
    t = text.strip().lower()
    negative = t.startswith("-")
    body = t[1:] if t[:1] in "+-" else t
    m = _INT.fullmatch(body)
    if not m:
        raise ValueError(f"not an integer: {text!r} ({_INTEGER_FORMS})")
    with _Unbounded():
        v = _integer(m)
    return -v if negative else v


def parse_number(text: str) -> Fraction | float:
    """The exact value of ``text`` (see the module docstring); ValueError naming the text otherwise."""
    t = text.strip().lower()
    negative = t.startswith("-")
    body = t[1:] if t[:1] in "+-" else t
    try:
        with _Unbounded():
            v = _unsigned(body) if body else None
    except ValueError as e:
        raise ValueError(f"not a number: {text!r} ({e})") from None
    if v is None:
        raise ValueError(f"not a number: {text!r} (an integer such as 1_000, 0x7f, 0o17 or 0b101, a decimal "
                         "such as -1.5e-3, a hex float such as 0x1.8p3, a ratio such as 1/3, inf or nan)")
    if isinstance(v, float):
        return -v if negative else v
    if v == 0:
        return -0.0 if negative else Fraction(0)
    return -v if negative else v


def round_to_float(v: Fraction | float, dtype: np.dtype | type) -> np.generic:
    """``v`` rounded once, to nearest even, into float32 or float64 (numpy scalar).

    Python's ``float(Fraction)`` is correctly rounded to float64; for float32 the float64 is first
    rounded to odd (the neighbour with an odd significand when inexact), which makes the second
    rounding exact (Boldo & Melquiond 2008) where a plain float64 -> float32 cast would round twice.
    Values beyond the type's range become ±inf, as a cast does; callers that must refuse them
    check ``np.isinf`` on a finite ``v``.
    """
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"round_to_float: dtype must be float32 or float64, not {dt}")
    if isinstance(v, float):
        return dt.type(v)
    try:
        x = float(v)
    except OverflowError:
        return dt.type(math.inf if v > 0 else -math.inf)
    if dt == np.dtype(np.float64):
        return np.float64(x)
    if Fraction(x) != v and x != 0 and math.isfinite(x):
        m, _ = math.frexp(x)
        if int(m * 2**53) % 2 == 0:  # even significand: take the neighbour toward v, which is odd
            x = math.nextafter(x, math.inf if Fraction(x) < v else -math.inf)
    elif x == 0 and v != 0:
        x = math.copysign(5e-324, v)  # below float64's range: the odd neighbour is the smallest subnormal
    with np.errstate(over="ignore"):
        return np.float32(x)
