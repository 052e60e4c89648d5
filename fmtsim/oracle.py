"""The exact slow twin: one value at a time, in rational arithmetic.

Written apart from rounding.py on purpose: it decodes codes straight from
the bit fields, orders every finite value on the real line (not by magnitude
sides), and rounds by comparing Fractions. The fast paths are tested equal to
it; it is too slow for anything but tests, tools and vector generation.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import replace
from fractions import Fraction
from functools import cache

from .formats import Format, get_format
from .policy import Policy, Profile, Resolved, RoundingMode, resolve
from .sources import source_type

__all__ = ["value_of", "encode_one", "exact_value"]



def round_ieee(v: Fraction | str, kind: str) -> Fraction | str:
    """``v`` rounded to nearest, ties to even, into the IEEE type ``kind`` (overflow to
    Inf); 'nan', '+inf', '-inf' and '-0' pass, and a negative that rounds to 0 is '-0'."""
    if isinstance(v, str) or v == 0:
        return v
    st = source_type(kind)
    p, emin = st.precision, st.emin
    a = abs(v)
    e = max(_floor_log2(a), emin)
    ulp = Fraction(2) ** (e - p + 1)
    q = a / ulp
    n = math.floor(q)
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    r = n * ulp
    if r >= Fraction(2) ** (st.emax + 1):
        return "-inf" if v < 0 else "+inf"
    if r == 0:
        return "-0" if v < 0 else Fraction(0)
    return -r if v < 0 else r


def _carry_below_half_normal(v: Fraction, kind: str) -> bool:
    """``v`` is below half the smallest normal of ``kind`` and its significand, rounded to
    nearest even at ``kind``'s precision with an unbounded exponent, becomes the next power of two."""
    st = source_type(kind)
    p, emin = st.precision, st.emin
    a = abs(v)
    if a == 0 or a >= Fraction(2) ** (emin - 1):
        return False
    e = _floor_log2(a)
    q = a / Fraction(2) ** (e - p + 1)  # in [2^(p-1), 2^p)
    n = math.floor(q)
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    return n == 1 << p


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
    if f.specials == "top_inf":  # P3109 Extended: one NaN, +-Inf at the top of each sign
        magnitude = code & ~(1 << (total - 1)) if f.signed else code
        top = (1 << (total - 1 if f.signed else total)) - 1
        if (f.signed and code == 1 << (total - 1)) or (not f.signed and code == top):
            return "nan"
        if magnitude == (top if f.signed else top - 1):
            return "-inf" if s else "+inf"
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
    return f.sign_mask if f.has_neg_zero else None


def _ulp_beyond(f: Format, v: Fraction) -> Fraction:
    """Distance from the largest finite magnitude to the next value of an unbounded exponent."""
    if f.kind == "int":
        return Fraction(2) ** f.scale_exp
    return Fraction(2) ** (_floor_log2(v) - f.man_bits)


def _quiet_nan(f: Format, negative: bool) -> int:
    if len(f.nan_codes) == 1:  # FNUZ, P3109, the unsigned formats
        return f.nan_codes[0]
    sign = (1 << (f.bits - 1)) if (negative and f.signed) else 0
    top = (1 << ((f.bits - 1) if f.signed else f.bits)) - 1
    if f.specials == "ieee":
        return sign | (top & ~((1 << f.man_bits) - 1)) | (1 << (f.man_bits - 1))
    return sign | top


def _canonical_nan(f: Format) -> int:
    """PTX's canonical NaN: positive, every bit below the sign set (a format with one NaN: that one)."""
    if len(f.nan_codes) == 1:
        return f.nan_codes[0]
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
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    *,
    rbits: int = 0,
    src: str = "float64",
    negative_nan: bool | None = None,
    nan_bits32: int | None = None,
    nan_bits: int | None = None,
    profile: str | Policy | Profile | None = None,
    policy: Resolved | None = None,
) -> tuple[int, int]:
    """(code, flags) of one value. ``x`` is a Python float (exact) or a Fraction.

    The policy is ``policy`` if given, else ``resolve(fmt, rounding, overflow, nan,
    profile)``; it is then specialised to ``src`` (per-source NaN modes). For a NaN
    input, ``negative_nan`` gives its sign (Python floats lose it through some
    operations); by default it is read from ``x`` (or ``nan_bits``). ``nan_bits`` is
    its bit pattern in ``src`` and ``nan_bits32`` its float32 pattern: read only by
    nan='payload' and 'payload_rounded' (default: the quiet NaN of that sign).
    """
    pol = (policy if policy is not None else resolve(fmt, rounding, overflow, nan, profile)).for_source(src)
    f = pol.fmt
    v = exact_value(x)
    if pol.via.type is not None and v != "nan":
        return _through_intermediate(v, f, pol, rbits)
    if v == "nan":
        return _encode_nan(x, f, pol, src, negative_nan, nan_bits, nan_bits32)
    if f.name == "e8m0" and pol.e8m0.encoding == "signed_exponent":
        return _e8m0_signed_exponent(v, pol)
    if f.name == "e8m0":
        done = _e8m0_no_code(v, f, pol)
        if isinstance(done, tuple):
            return done
        v = done
    if v in ("+inf", "-inf"):
        return _encode_inf(v == "-inf", f, pol)
    if v == "-0":
        return _encode_neg_zero(f, pol)
    assert isinstance(v, Fraction)
    code, fl = _encode_number(v, f, pol, rbits, src)
    return _underflow_rule(v, f, pol, code, fl)


def _underflow_rule(v: Fraction, f: Format, pol: Resolved, code: int, fl: int) -> tuple[int, int]:
    """subnormal_flush, then neg_underflow, for the finite nonzero value v rounded to ``code``."""
    rule = pol.on_underflow
    if rule.flush != "none" and v != 0 and (v > 0 or f.signed):
        assert f.min_normal is not None
        if rule.flush == "inputs":
            flushed = abs(v) < f.min_normal
        else:
            got = value_of(code, f)
            flushed = isinstance(got, Fraction) and 0 < abs(got) < f.min_normal
        if flushed:
            code, fl = (f.sign_mask if v < 0 and f.has_neg_zero else 0), _INEXACT | _UNDERFLOW
    if v < 0 and rule.negative_zero == "positive" and f.has_neg_zero and code == f.sign_mask:
        return 0, fl  # the zero a negative rounded to, written as +0; its flags stay
    return code, fl


_INEXACT, _UNDERFLOW, _OVERFLOW, _INVALID, _SATURATED = 1, 2, 4, 16, 32


def _zero_code(f: Format, symmetric: bool) -> int:
    code = next((c for val, c in _finite_codes(f, symmetric) if val == 0), None)
    assert code is not None, f"{f.name} has no zero"
    return code


def _through_intermediate(v: Fraction | str, f: Format, pol: Resolved, rbits: int) -> tuple[int, int]:
    """Double rounding: ``v`` rounded into the intermediate IEEE type first, then converted."""
    kind = pol.via.type
    assert kind is not None
    w = round_ieee(v, kind)
    if pol.via.carry == "doubles_subnormal" and isinstance(v, Fraction) and _carry_below_half_normal(v, kind):
        w = round_ieee(2 * v, kind)
    code, fl = encode_one(w if isinstance(w, Fraction) else _special_float(w), f, rbits=rbits,
                          src=kind, policy=pol.without_intermediate())
    return code, fl | (_INEXACT if w != v else 0)


def _encode_nan(x: float | Fraction, f: Format, pol: Resolved, src: str, negative_nan: bool | None,
                nan_bits: int | None, nan_bits32: int | None) -> tuple[int, int]:
    """A NaN input: the mode of its sign (or of a signalling NaN), then the flag rule."""
    st = source_type(src)
    rule = pol.on_nan
    neg = _nan_sign(x, negative_nan, nan_bits, src) and not rule.sign_dropped
    if rule.sign_dropped and nan_bits is not None:
        nan_bits &= ~st.sign_bit
    signaling = nan_bits is not None and not nan_bits & st.quiet_bit
    mode = rule.negative if neg else rule.mode
    if rule.signaling is not None and signaling:
        mode = rule.signaling  # a signalling NaN (quiet bit clear): its own mode, either sign
    if mode == "as_inf":  # converted as the Inf of its sign
        code, _ = encode_one(-math.inf if neg else math.inf, f, src=src, policy=pol)
        fl = 0 if value_of(code, f) == "nan" else _INVALID
    else:
        if nan_bits is None and mode in ("payload", "quiet_payload"):
            nan_bits = nan_bits32 if nan_bits32 is not None and src == "float32" else _quiet_pattern(src, neg)
        code, fl = _nan_input(f, pol, mode, neg, nan_bits, nan_bits32, src)
    if pol.flags.nan == "signaling":  # IEEE 754 7.2: invalid for a signalling NaN only
        fl = _INVALID if signaling else 0
    return code, fl


def _e8m0_no_code(v: Fraction | str, f: Format, pol: Resolved) -> tuple[int, int] | Fraction | str:
    """E8M0's inputs without a code (negatives, zeros, +Inf, tiny) under the e8m0 rule: (code, flags),
    or the value to convert on (a negative's magnitude under e8m0_negative='abs', or ``v`` itself)."""
    rule = pol.e8m0
    if v in ("-inf", "-0") or (isinstance(v, Fraction) and v < 0):
        if rule.negative == "nan":
            return 0xFF, _INVALID
        if rule.negative == "min":
            return 0x00, _INEXACT | _SATURATED
        v = "+inf" if v == "-inf" else (Fraction(0) if v == "-0" else -v)  # type: ignore[operator]
    if v == 0:
        return (0xFF, _INVALID) if rule.zero == "nan" else (0x00, _INEXACT | _SATURATED)
    if v == "+inf":
        return (0xFF, _INVALID) if rule.inf == "nan" else (0xFE, _INEXACT | _SATURATED)
    assert isinstance(v, Fraction)
    lo_val, lo_code = _finite_codes(f, False)[0]
    if v < lo_val:
        if rule.tiny == "nan":
            return 0xFF, _INVALID
        return lo_code, _INEXACT | (_UNDERFLOW if _tiny(v, f, pol, lo_val) else 0)
    return v


def _encode_inf(negative: bool, f: Format, pol: Resolved) -> tuple[int, int]:
    """An infinite input under the inf rule and the overflow mode."""
    symmetric = pol.on_overflow.mode == "satsym"
    finite = _finite_codes(f, symmetric)
    to_nan = _INVALID if pol.flags.inf_nan == "invalid" else _INEXACT
    if negative and not f.signed:
        if pol.on_overflow.unsigned_negative == "nan":
            return f.nan_codes[0], to_nan
        return _zero_code(f, symmetric), _INEXACT | _SATURATED
    code_max = finite[0][1] if negative else finite[-1][1]
    to_number = _INEXACT | _SATURATED if pol.flags.inf_number == "inexact" else 0
    how = pol.on_input.inf
    if how == "infinite" and f.has_inf:
        return min(f.inf_codes) | ((1 << (f.bits - 1)) if negative else 0), 0
    if how == "nan":
        return _nan_for_overflow(f, pol, negative), to_nan
    if how == "zero":
        nz = _neg_zero_code(f)
        return (nz if negative and nz is not None else _zero_code(f, symmetric)), to_number
    if how == "max":
        return code_max, to_number
    if not pol.on_overflow.saturating and f.has_inf:
        return min(f.inf_codes) | ((1 << (f.bits - 1)) if negative else 0), 0
    if not pol.on_overflow.saturating and f.has_nan:
        return _nan_for_overflow(f, pol, negative), to_nan
    return code_max, to_number


def _encode_neg_zero(f: Format, pol: Resolved) -> tuple[int, int]:
    """An exact -0.0 input: -0 where the format has one, unless the input rule writes +0."""
    zero = _zero_code(f, pol.on_overflow.mode == "satsym")
    if pol.on_input.neg_zero == "positive":
        return zero, 0
    nz = _neg_zero_code(f)
    if nz is not None:
        return nz, 0
    lost = pol.flags.neg_zero == "inexact" and f.kind == "float"  # the zero has no sign to keep
    return zero, _INEXACT if lost else 0


def _encode_number(v: Fraction, f: Format, pol: Resolved, rbits: int, src: str) -> tuple[int, int]:
    """A finite nonzero value (or +0): exact, or rounded between its neighbours, then the overflow rule."""
    symmetric = pol.on_overflow.mode == "satsym"
    finite = _finite_codes(f, symmetric)
    lo_val, lo_code = finite[0]
    hi_val, hi_code = finite[-1]
    if v < 0 and not f.signed:
        if pol.on_overflow.unsigned_negative == "nan":  # rounded by its magnitude, as a negative rounds
            mirrored: RoundingMode = {"rup": "rdn", "rdn": "rup", "rnm": "rna", "rnp": "rnz"}.get(  # type: ignore[assignment]
                pol.rounding, pol.rounding)
            code, fl = _encode_number(-v, f, replace(pol, rounding=mirrored), rbits, src)
            if code != _zero_code(f, symmetric):
                return f.nan_codes[0], _INVALID
            return code, _INEXACT | _UNDERFLOW
        return _zero_code(f, symmetric), _INEXACT | _SATURATED
    vals_sorted = _sorted_values(f, symmetric)
    k = bisect.bisect_left(vals_sorted, v)
    if k < len(finite) and vals_sorted[k] == v:
        return finite[k][1], 0
    # neighbours on the real line; past either end sits the value an unbounded
    # exponent would have there (code None): landing on it is overflow
    above_top = hi_val + _ulp_beyond(f, hi_val)
    below_bottom = lo_val - _ulp_beyond(f, -lo_val) if lo_val < 0 else None
    before = pol.on_overflow.when == "before" and (v > hi_val or v < lo_val)
    pick: tuple[Fraction, int | None]
    if before or v >= above_top or (below_bottom is not None and v <= below_bottom):
        pick = (v, None)
    else:
        down: tuple[Fraction, int | None] = finite[k - 1] if k > 0 else (below_bottom, None)  # type: ignore[assignment]
        up: tuple[Fraction, int | None] = finite[k] if k < len(finite) else (above_top, None)
        pick = _pick_neighbour(v, down, up, pol, hi_code if v > 0 else lo_code, rbits, src)

    flags = _INEXACT
    if f.kind == "float" and f.min_normal is not None and 0 < abs(v) < f.min_normal and _tiny(v, f, pol, abs(pick[0])):
        flags |= _UNDERFLOW
    if pick[1] is not None:
        nz = _neg_zero_code(f)
        if pick[0] == 0 and v < 0 and nz is not None:
            return nz, flags  # a negative that rounds to zero is -0
        return pick[1], flags
    mode = pol.rounding
    positive = v > 0
    toward_finite = mode == "rtz" or (mode == "rup" and not positive) or (mode == "rdn" and positive) or \
        (mode == "rto" and (hi_code if positive else lo_code) & 1 == 1)
    if not pol.on_overflow.saturating and not toward_finite:
        if f.has_inf:
            return min(f.inf_codes) | (0 if positive else 1 << (f.bits - 1)), flags | _OVERFLOW
        if f.has_nan:
            return _nan_for_overflow(f, pol, not positive), flags | _OVERFLOW
    # clamped to +-max finite: an overflow unless only non-finite results count as one
    return (hi_code if positive else lo_code), flags | _SATURATED | (_OVERFLOW if pol.flags.overflow == "rounded"
                                                                     else 0)


def _pick_neighbour(v: Fraction, down: tuple[Fraction, int | None], up: tuple[Fraction, int | None],
                    pol: Resolved, end_code: int, rbits: int, src: str) -> tuple[Fraction, int | None]:
    """The rounding mode's choice between the neighbours ``down`` < v < ``up`` ((value, code); code
    None past the finite range). ``end_code`` is the code at the end on v's side (the parity of the
    value beyond it is the opposite of its)."""
    mode = pol.rounding
    toward_zero, away = (down, up) if v > 0 else (up, down)
    if mode == "rtz":
        return toward_zero
    if mode == "rup":
        return up
    if mode == "rdn":
        return down
    tz_code = toward_zero[1]
    tz_parity = tz_code & 1 if tz_code is not None else 1 - (end_code & 1)
    if mode == "rto":
        return toward_zero if tz_parity == 1 else away
    if mode in ("rne", "rna", "rnz", "rnm", "rnp"):
        dz = abs(v - toward_zero[0])
        da = abs(away[0] - v)
        if dz != da:
            return toward_zero if dz < da else away
        if mode == "rna" or (mode == "rnm" and v < 0) or (mode == "rnp" and v > 0):
            return away
        if mode in ("rnz", "rnm", "rnp"):
            return toward_zero
        return toward_zero if tz_parity == 0 else away
    if mode == "sr":
        return away if _stochastic_away(v, toward_zero[0], away[0], pol, rbits, src) else toward_zero
    raise ValueError(mode)  # pragma: no cover


def _stochastic_away(v: Fraction, toward_zero: Fraction, away: Fraction, pol: Resolved, rbits: int,
                     src: str) -> bool:
    """The stochastic rule's choice (policy.py), by its definition, for the fraction of the gap."""
    frac = abs(v - toward_zero) / abs(away - toward_zero)
    rule, n = pol.stochastic.rule, pol.stochastic.bits
    if rule == "equal":
        return rbits % 2 == 1
    if n is None:  # the source bits the rounding discards, up to 32
        st = source_type(src)
        ulp = Fraction(2) ** (max(_floor_log2(abs(v)), st.emin) - (st.precision - 1))
        n = 0
        while Fraction(2) ** n * ulp < abs(away - toward_zero):
            n += 1
        n = min(n, 32)
        rbits %= 1 << n
    if rule == "offset":
        return math.floor(frac * 2 ** (n + 1)) + 2 * rbits + 1 >= 2 ** (n + 1)
    scaled = frac * 2**n
    if rule == "nearest":
        fl = math.floor(scaled)
        rem = scaled - fl
        scaled = fl + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1) else 0)
    else:
        scaled = math.floor(scaled)
    return scaled + rbits >= 2**n


def _special_float(w: str) -> float:
    return {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf, "-0": -0.0}[w]


def _nan_sign(x: float | Fraction, negative_nan: bool | None, nan_bits: int | None, src: str) -> bool:
    if negative_nan is not None:
        return negative_nan
    if nan_bits is not None:
        return bool(nan_bits & source_type(src).sign_bit)
    return math.copysign(1.0, float(x)) < 0


def _quiet_pattern(src: str, negative: bool) -> int:
    st = source_type(src)
    man, exp = st.man_bits, st.exp_bits
    return (int(negative) << (man + exp)) | (((1 << exp) - 1) << man) | (1 << (man - 1))


def _as_float32_nan_bits(bits: int, src: str) -> int:
    """A NaN pattern of ``src`` as float32 would hold it: the significand's top bits."""
    st = source_type(src)
    man, exp = st.man_bits, st.exp_bits
    sign = bits >> (man + exp) & 1
    field = bits & ((1 << man) - 1)
    field = field << (23 - man) if man <= 23 else field >> (man - 23)
    return (sign << 31) | 0x7F800000 | field


def _e8m0_signed_exponent(v: Fraction | str, pol: Resolved) -> tuple[int, int]:
    """E8M0 under e8m0_encoding='signed_exponent' (policy.py), one value, by its definition:
    the neighbours of |v| among 0 and the powers of two 2^-127..2^127 (and beyond), the
    rounding mode's choice between them, then the packing. NaN never reaches here."""
    inexact_f, underflow_f, overflow_f, invalid_f, saturated_f = 1, 2, 4, 16, 32
    if v in ("+inf", "-inf"):
        return 0xFF, inexact_f if pol.flags.inf_nan == "inexact" else invalid_f
    if v == "-0" or v == 0:
        return 0x00, 0
    assert isinstance(v, Fraction)
    negative, a = v < 0, abs(v)
    if a < Fraction(2) ** -127:
        lo, hi = Fraction(0), Fraction(2) ** -127
    else:
        e = _floor_log2(a)
        lo, hi = Fraction(2) ** e, Fraction(2) ** (e + 1)
    mode = pol.rounding
    toward_zero = mode == "rtz" or (mode == "rup" and negative) or (mode == "rdn" and not negative)
    if a == lo or toward_zero:
        result = lo
    elif mode in ("rup", "rdn"):
        result = hi
    elif a - lo != hi - a:
        result = lo if a - lo < hi - a else hi
    else:  # a tie: rna away; rne to the even 1-bit significand (zero's is 0, every power's 1)
        result = hi if mode == "rna" or lo > 0 else lo
    inexact = inexact_f if result != a or result > Fraction(2) ** 127 else 0  # past the top is never exact
    if result > Fraction(2) ** 127:  # past the top: 2^127 where rounding goes toward zero, else the NaN
        if toward_zero:
            return 0xFE, inexact | saturated_f | (0 if pol.flags.overflow == "infinite" else overflow_f)
        return 0xFF, inexact | overflow_f
    if result == 0:
        return 0x00, inexact | underflow_f
    return (_floor_log2(result) + 127) | (0x80 if negative else 0), inexact


def _tiny(v: Fraction, f: Format, pol: Resolved, result: Fraction) -> bool:
    """Whether the underflow flag calls the inexact result of ``v`` tiny."""
    assert f.min_normal is not None
    a = abs(v)
    if not 0 < a < f.min_normal:
        return False
    if pol.flags.tininess == "before":
        return True
    if pol.rounding == "sr" or pol.flags.tininess == "result":
        return result != f.min_normal
    # the value rounded to the format's precision with no lower exponent bound
    p = f.man_bits + 1
    ulp = Fraction(2) ** (_floor_log2(a) - p + 1)
    lo = math.floor(a / ulp) * ulp
    hi = lo + ulp
    negative = v < 0
    mode = pol.rounding
    if lo == a:
        r = a
    elif mode == "rtz" or (mode == "rup" and negative) or (mode == "rdn" and not negative):
        r = lo
    elif mode in ("rup", "rdn"):
        r = hi
    elif mode == "rto":
        r = lo if (lo / ulp) % 2 == 1 else hi
    elif a - lo != hi - a:
        r = lo if a - lo < hi - a else hi
    elif mode == "rna" or (mode == "rnm" and negative) or (mode == "rnp" and not negative):
        r = hi
    elif mode in ("rnz", "rnm", "rnp"):
        r = lo
    else:
        r = lo if (lo / ulp) % 2 == 0 else hi
    return r < f.min_normal


def _nan_input(f: Format, pol: Resolved, mode: str, neg: bool, bits: int | None, bits32: int | None,
               src: str) -> tuple[int, int]:
    """(code, flags) of a NaN input under NaN mode ``mode``."""
    INVALID = 16
    finite = _finite_codes(f, pol.on_overflow.mode == "satsym")
    hi_code = finite[-1][1]
    zero_code = next((c for val, c in finite if val == 0), None)
    if f.name == "e8m0":
        return (pol.fixed_nan_code(neg), INVALID) if mode == "fixed" else (0xFF, 0)
    if mode == "zero_sign_flipped" and f.has_nan:
        mode = "signed"
    if mode in ("signed", "positive", "signed_all_ones", "all_ones", "canonical"):
        return _nan_by_name(f, mode, neg), 0
    if mode == "fixed":
        code = pol.fixed_nan_code(neg)
        return code, 0 if value_of(code, f) == "nan" else INVALID
    if mode == "inf":
        return min(f.inf_codes) | ((1 << (f.bits - 1)) if neg else 0), INVALID
    if mode == "neg_zero":
        return 1 << (f.bits - 1), INVALID
    if mode == "signed_max":
        lo_code = finite[0][1]
        return (lo_code if neg and f.signed else hi_code), INVALID
    if mode in ("payload", "quiet_payload"):
        assert bits is not None
        man = source_type(src).man_bits
        if mode == "quiet_payload":
            bits |= 1 << (man - 1)
        top = (bits & ((1 << man) - 1)) >> (man - f.man_bits)
        code = (1 << (f.bits - 1) if neg else 0) | (((1 << f.exp_bits) - 1) << f.man_bits) | top
        return code, 0 if value_of(code, f) == "nan" else INVALID
    if mode == "payload_rounded":  # rounded as +-1.m, m the float32 significand field
        b32 = bits32 if bits32 is not None else (
            _as_float32_nan_bits(bits, src) if bits is not None else (0xFFC00000 if neg else 0x7FC00000))
        one_m = (1 + Fraction(b32 & 0x7FFFFF, 1 << 23)) * (-1 if b32 >> 31 else 1)
        return encode_one(one_m, f, "rne", "satfinite", "zero")[0], INVALID
    if mode == "max":
        return hi_code, INVALID
    if mode == "zero_sign_flipped":
        nz = _neg_zero_code(f)
        assert zero_code is not None
        return (zero_code if neg or nz is None else nz), INVALID
    assert zero_code is not None
    return zero_code, INVALID  # "zero", and "raise" (callers raise before)


def _nan_by_name(f: Format, mode: str, neg: bool) -> int:
    """The NaN code a named NaN-writing mode gives for a sign."""
    if mode == "signed":
        return _quiet_nan(f, neg)
    if mode == "positive":
        return _quiet_nan(f, False)
    if mode == "signed_all_ones":
        if len(f.nan_codes) == 1 or not f.signed:
            return _canonical_nan(f)
        return _canonical_nan(f) | (1 << (f.bits - 1) if neg else 0)
    if mode == "all_ones":
        ones = (1 << f.bits) - 1
        return ones if value_of(ones, f) == "nan" else _quiet_nan(f, False)
    assert mode == "canonical", mode
    return _canonical_nan(f)


def _nan_for_overflow(f: Format, pol: Resolved, negative: bool) -> int:
    if pol.on_overflow.nan is not None:
        return _nan_by_name(f, pol.on_overflow.nan, negative)
    if pol.on_nan.mode in ("canonical", "all_ones"):
        return _nan_by_name(f, pol.on_nan.mode, negative)
    return _quiet_nan(f, negative)


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e
