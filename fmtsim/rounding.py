"""The one place where a number becomes a code.

Two layers, both exact:

1. :func:`encode_f64` rounds float64 values (every float16, bfloat16 and
   float32 value is one exactly) onto a format's grid with ``searchsorted``
   over the exact float64 grid, midpoints included. It handles every rounding
   mode, the overflow and NaN policies, and reports exception flags. It is the
   engine the tables are built from, and what flags and stochastic rounding use.

2. Table-driven fast paths that never round twice:

   * float16 / bfloat16 input: one 65536-entry table indexed by the bit pattern.
   * float32 input: the pattern is cut to its top ``32 - s`` bits *rounded to
     odd* (the cut-off bits OR-ed into the kept LSB) and that index reads a
     table. Round-to-odd to ``p' >= p + 2`` bits followed by any rounding to
     ``p`` bits equals one direct rounding (Boldo & Melquiond, "Emulation of
     FMA and correctly rounded sums: proved algorithms using rounding to odd",
     IEEE TC 2008). ``s`` is derived per format so that every rounding boundary
     (grid values and midpoints) sits on an even index: at most 16.
   * float64 input: rounded to odd into float32 first (same theorem), then the
     float32 path. A float64 therefore never passes through an RNE float32.

Stochastic rounding (``sr``) defined for any source type: with ``a`` the exact
magnitude, ``lo`` the format value at or below it and ``gap`` the distance to
the next value up (a power of two), ``f = (a - lo) / gap`` is the discarded
fraction. ``D`` is the number of significand bits the conversion discards:
``log2(gap / ulp_src(a))`` where ``ulp_src`` is the spacing of the *source*
type at ``a`` (float32: 2^(max(e,-126)-23)), clipped to 0..32. So for float32
into a normal E4M3 result D = 20, and it grows by one for every binade the
result sits below the format's smallest normal. The result rounds away from
zero iff ``floor(f * 2^D) + (rbits mod 2^D) >= 2^D``: the discarded bits plus
the low ``D`` random bits carry out, as PTX ``cvt.rs`` describes. When more
than 32 bits are discarded only the top 32 discarded bits take part.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cache, lru_cache
from typing import Any

import ml_dtypes
import numpy as np

from .formats import CLASS_INF, CLASS_NAN, Format
from .native import Library
from .policy import Resolved, StochasticRule, UnderflowRule
from .sources import SOURCE_TYPES, source_type

__all__ = [
    "FLAG_INEXACT",
    "FLAG_UNDERFLOW",
    "FLAG_OVERFLOW",
    "FLAG_INFINITE",
    "FLAG_INVALID",
    "FLAG_SATURATED",
    "encode_f64",
    "encode_fast",
    "table_f32",
    "table_16",
    "odd_f64_to_f32_bits",
]

# TestFloat / SoftFloat flag bits, plus fmtsim's "saturated".
FLAG_INEXACT = 1
FLAG_UNDERFLOW = 2
FLAG_OVERFLOW = 4
FLAG_INFINITE = 8  # SoftFloat's divide-by-zero flag: a conversion never raises it
FLAG_INVALID = 16
FLAG_SATURATED = 32


CHUNK = 1 << 16  # elements per pass: keeps temporaries in cache and scratch memory bounded


@dataclass(frozen=True)
class _Side:
    """The codes of one sign, ordered by magnitude, plus the next value beyond max.

    ``mag[n + 1]`` is the value the format would have after its max if its exponent were unbounded:
    rounding there means overflow. Magnitudes and midpoints are float64 *keys*: the smallest float64
    at or above the exact value, with a mask saying where the key is the value itself. For a float64
    ``a``, ``key <= a`` exactly when ``value <= a``, so searching the keys finds the same neighbours
    as searching the exact values would; formats whose values all are float64s (every byte format)
    have keys equal to their values. ``gap_exp[i]`` is log2 of the distance from entry i to i + 1.
    """

    mag: np.ndarray  # float64 keys, length n + 2
    mag_exact: np.ndarray  # bool, length n + 2
    mid: np.ndarray  # float64 keys of the midpoints (mag[i] + mag[i + 1]) / 2, length n + 1
    mid_exact: np.ndarray  # bool, length n + 1
    gap_exp: np.ndarray  # int64, length n + 1
    codes: np.ndarray  # int64, length n + 1
    parity: np.ndarray  # int64 code LSBs, length n + 2 (last: the next value's)
    overflow_code: int  # what nonsat overflow, and an infinite input under nonsat, produce

    @property
    def n(self) -> int:
        return len(self.codes) - 1


def _ceil_keys(sig: np.ndarray, exp2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest float64 at or above each sig * 2^exp2 (sig >= 0 integers), and whether it is exact."""
    with np.errstate(over="ignore", under="ignore"):
        v = np.ldexp(sig.astype(np.float64), exp2)
        back = np.ldexp(v, -exp2)  # exact unless v overflowed (then Inf, never exact)
    exact = np.isfinite(v) & (back == sig)
    fell = np.isfinite(v) & (back < sig)  # ldexp rounded to nearest, below the value (or to 0)
    v[fell] = np.nextafter(v[fell], np.inf)
    return v, exact


@cache
def magnitude_keys(fmt: Format) -> tuple[np.ndarray, np.ndarray]:
    """Every code's |value| as a float64 key (see :class:`_Side`; NaN codes NaN, Inf codes Inf) and
    whether the key is the value itself."""
    p = fmt.parts
    keys, exact = _ceil_keys(p.sig, p.exp2)
    keys[p.cls == CLASS_NAN] = np.nan
    keys[p.cls == CLASS_INF] = np.inf
    for a in (keys, exact):
        a.flags.writeable = False
    return keys, exact


@cache
def _sides(fmt: Format, symmetric: bool = False) -> tuple[_Side, _Side | None]:
    parts = fmt.parts
    codes = np.arange(fmt.n_codes)
    finite = parts.finite
    negbit = parts.negative if fmt.signed or fmt.kind == "int" else np.zeros(fmt.n_codes, bool)
    zero = finite & (parts.sig == 0)
    pos = finite & ~negbit
    neg = finite & negbit
    if fmt.kind == "int" and fmt.signed:
        neg = neg | zero  # zero is on both sides of a two's complement grid
    if not fmt.has_neg_zero and fmt.has_zero:
        # FNUZ: -0 and tiny negatives -> 0x00; unsigned formats clamp negatives to 0
        neg = neg | zero
    if symmetric:  # the most negative integer is left out
        neg &= codes != fmt._extreme_finite(False)
    # magnitude order: the code without its sign for floats, the integer's magnitude for integers
    order_key = parts.sig if fmt.kind == "int" else codes & ~fmt.sign_mask

    def make(mask: np.ndarray, negative: bool) -> _Side:
        c = codes[mask]
        order = np.argsort(order_key[mask], kind="stable")
        c = c[order]
        sig, exp2 = parts.sig[c], parts.exp2[c]
        if sig[-1] == 0:  # only zero on this side: the next value up is the smallest positive
            nxt = int(np.argmax(finite & ~negbit & (parts.sig > 0)))
            sig_next, exp2_next = parts.sig[nxt], parts.exp2[nxt]
        else:  # one step of the top binade (integers: one step)
            sig_next, exp2_next = sig[-1] + 1, exp2[-1]
        sig, exp2 = np.append(sig, sig_next), np.append(exp2, exp2_next)
        mag, mag_exact = _ceil_keys(sig, exp2)
        # midpoints and gaps of neighbours, at a common exponent (neighbours' exponents differ by 0 or 1)
        low_exp = np.minimum(exp2[:-1], exp2[1:]) - 1
        a, b = sig[:-1] << (exp2[:-1] - low_exp), sig[1:] << (exp2[1:] - low_exp)
        mid, mid_exact = _ceil_keys(a + b, low_exp - 1)
        gap = b - a
        assert (gap > 0).all() and not (gap & (gap - 1)).any(), fmt.name  # a power of two
        gap_exp = low_exp + np.log2(gap).astype(np.int64)
        par = np.append(c & 1, 1 - (c[-1] & 1))
        sign = fmt.sign_mask if negative else 0
        max_code = int(c[-1])
        if negative and not fmt.signed:
            ovf = max_code  # unsigned: negatives clamp to zero
        elif fmt.has_inf:
            ovf = min(fmt.inf_codes) | sign
        elif fmt.has_nan:
            ovf = _quiet_nan(fmt, negative)
        else:
            ovf = max_code
        arrays = (mag, mag_exact, mid, mid_exact, gap_exp)
        for arr in arrays:
            arr.flags.writeable = False
        return _Side(*arrays, c.astype(np.int64), par.astype(np.int64), int(ovf))

    pos_side = make(pos, False)
    neg_side = make(neg, True) if neg.any() else None
    return pos_side, neg_side


def _quiet_nan(fmt: Format, negative: bool) -> int:
    """The quiet NaN of a sign: top mantissa bit set (E5M2 0x7E), else all ones."""
    if len(fmt.nan_codes) == 1:  # FNUZ, P3109, the unsigned formats: one NaN, whatever the sign
        return fmt.nan_codes[0]
    sign = fmt.sign_mask if (negative and fmt.signed) else 0
    cands = [c for c in fmt.nan_codes if (c & fmt.sign_mask) == sign]
    if fmt.specials == "ieee":
        quiet_bit = 1 << (fmt.man_bits - 1)
        return min(c for c in cands if c & quiet_bit)
    return max(cands)


def _nan_code(pol: Resolved, negative: np.ndarray, mode: str | None = None) -> np.ndarray:
    """Codes for NaN inputs under one NaN mode (default: the policy's, split by sign).

    The 'raise' policy is enforced by the caller; 'payload' gives the code of a quiet
    NaN's payload here (callers with the source bits use :func:`payload_nan_codes`)."""
    fmt = pol.fmt
    if mode is None:
        rule = pol.on_nan
        if rule.negative != rule.mode:
            return np.where(negative, _nan_code(pol, negative, rule.negative), _nan_code(pol, negative, rule.mode))
        mode = rule.mode
    n = mode
    if n == "zero_sign_flipped" and fmt.has_nan:
        n = "signed"
    if n == "signed":
        return np.where(negative, _quiet_nan(fmt, True), _quiet_nan(fmt, False))
    if n == "positive":
        return np.full(negative.shape, _quiet_nan(fmt, False))
    if n == "signed_all_ones":
        if len(fmt.nan_codes) == 1:
            return np.full(negative.shape, _quiet_nan(fmt, False))
        top = max(c for c in fmt.nan_codes if not c & fmt.sign_mask)
        return np.where(negative & fmt.signed, top | fmt.sign_mask, top)
    if n == "all_ones":
        ones = fmt.n_codes - 1
        return np.full(negative.shape, ones if ones in fmt.nan_codes else _quiet_nan(fmt, False))
    if n == "canonical":
        return np.full(negative.shape, _quiet_nan(fmt, False) if len(fmt.nan_codes) == 1 else
                       max(c for c in fmt.nan_codes if not c & fmt.sign_mask))
    if n == "fixed":
        return np.where(negative, pol.fixed_nan_code(True), pol.fixed_nan_code(False))
    if n == "inf":
        return np.where(negative, min(fmt.inf_codes) | fmt.sign_mask, min(fmt.inf_codes))
    if n == "neg_zero":
        return np.full(negative.shape, fmt.sign_mask)
    if n in ("payload", "quiet_payload"):  # a quiet NaN's payload: the top mantissa bit only
        quiet = np.full(negative.shape, 1 << (fmt.man_bits - 1)) | (fmt.n_codes - 1 - fmt.sign_mask
                                                                    - ((1 << fmt.man_bits) - 1))
        return np.where(negative, quiet | fmt.sign_mask, quiet)
    pos, neg = _sides(fmt)
    zero = int(pos.codes[0]) if pos.mag[0] == 0 else 0
    if n == "max":
        return np.full(negative.shape, int(pos.codes[-1]))
    if n == "signed_max":
        neg_max = int(neg.codes[-1]) if neg is not None and fmt.signed else int(pos.codes[-1])
        return np.where(negative, neg_max, int(pos.codes[-1]))
    if n == "zero_sign_flipped":
        negzero = zero | fmt.sign_mask if fmt.has_neg_zero else zero
        return np.where(negative, zero, negzero)
    return np.full(negative.shape, zero)  # "zero"; placeholders for "raise", "payload_rounded"


def payload_nan_codes(bits: np.ndarray, src: str, pol: Resolved) -> np.ndarray:
    """Codes of NaNs given as bit patterns of ``src`` under their sign's NaN mode, where
    that mode reads the pattern ('payload': sign, all-ones exponent, top mantissa bits;
    'payload_rounded'); other modes as :func:`_nan_code`."""
    fmt = pol.fmt
    width = 64 if src == "float64" else 32 if src == "float32" else 16
    b = bits.astype(np.uint64)
    negative = (b >> np.uint64(width - 1)) & np.uint64(1) == 1
    if pol.on_nan.signaling is not None:  # signalling NaNs (quiet bit clear) under their own mode
        out = np.empty(b.shape, np.int64)
        signaling = b & np.uint64(source_type(src).quiet_bit) == 0
        as_sig = replace(pol, on_nan=pol.on_nan.as_signaling())
        for sel, p in ((signaling, as_sig), (~signaling, replace(pol, on_nan=replace(pol.on_nan, signaling=None)))):
            if sel.any():
                out[sel] = payload_nan_codes(b[sel], src, p)
        return out
    out = _nan_code(pol, negative).astype(np.int64)
    for mode, sel in ((pol.on_nan.mode, ~negative), (pol.on_nan.negative, negative)):
        if not sel.any():
            continue
        if mode in ("payload", "quiet_payload"):
            shift = np.uint64(source_type(src).man_bits - fmt.man_bits)
            top = (b[sel] >> shift) & np.uint64((1 << fmt.man_bits) - 1)
            if mode == "quiet_payload":
                top |= np.uint64(1 << (fmt.man_bits - 1))
            exp_ones = fmt.n_codes - 1 - fmt.sign_mask - ((1 << fmt.man_bits) - 1)
            out[sel] = top.astype(np.int64) | exp_ones | np.where(negative[sel], fmt.sign_mask, 0)
        elif mode == "payload_rounded":
            b32 = _bits_as_float32_bits(b[sel], src)
            out[sel] = payload_rounded_nan_codes(b32, pol)
    return out


def _bits_as_float32_bits(b: np.ndarray, src: str) -> np.ndarray:
    st = source_type(src)
    with np.errstate(invalid="ignore"):
        return b.astype(st.bits_dtype).view(st.dtype).astype(np.float32).view(np.uint32)


def payload_rounded_nan_codes(bits32: np.ndarray, pol: Resolved) -> np.ndarray:
    """nan='payload_rounded': each NaN (as float32 bits) encoded as +-1.m, m its significand field."""
    as_one = ((bits32.astype(np.uint32) & np.uint32(0x807FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
    return encode_f64(as_one.astype(np.float64), _payload_rounding(pol.fmt))[0]


@cache
def _payload_rounding(fmt: Format) -> Resolved:
    """nan='payload_rounded' rounds +-1.m to nearest even, saturating (no NaN reaches it)."""
    from .policy import resolve

    return resolve(fmt, "rne", "satfinite", "zero")


def _overflow_nan(pol: Resolved, code: int, negative: bool) -> int:
    """A NaN that overflow (or an Inf input) produces: written as ``overflow_nan`` says;
    by default like a NaN input under the 'canonical' and 'all_ones' policies (PTX,
    gfloat), otherwise the signed quiet NaN."""
    if code not in pol.fmt.nan_codes:
        return code
    if pol.on_overflow.nan is not None:
        return int(_nan_code(pol, np.array([negative]), pol.on_overflow.nan)[0])
    if pol.on_nan.mode in ("canonical", "all_ones"):
        return int(_nan_code(pol, np.array([negative]), pol.on_nan.mode)[0])
    return code


def _rounded_once(x: np.ndarray, kind: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if kind == "float32":
            return x.astype(np.float32)
        # round to odd into float32 first: 24 >= 11 + 2 bits, so the next RNE is the only one
        f32 = odd_f64_to_f32_bits(np.asarray(x, dtype=np.float64)).view(np.float32)
        return f32.astype(np.float16 if kind == "float16" else ml_dtypes.bfloat16)


def to_intermediate(x: np.ndarray, kind: str, carry: str = "exact") -> np.ndarray:
    """float64 values rounded once, to nearest even, into ``kind`` (overflow -> Inf); as that
    dtype. ``carry='doubles_subnormal'``: the policy field of that name (twice the input where
    a carry out of the significand meets an input below half the smallest normal)."""
    x = np.asarray(x, dtype=np.float64)
    out = _rounded_once(x, kind)
    if carry == "doubles_subnormal":
        p, emin = SOURCE_TYPES[kind].precision, SOURCE_TYPES[kind].emin
        with np.errstate(invalid="ignore"):
            a = np.abs(x)
            m, _ = np.frexp(a)  # a = m * 2^e, m in [0.5, 1): the significand carries iff m >= 1 - 2^-(p+1)
            hit = (a > 0) & (a < 2.0 ** (emin - 1)) & (m >= 1 - 2.0 ** -(p + 1))
        if hit.any():
            out[hit] = _rounded_once(2 * x[hit], kind)
    return out


_PROPORTIONAL = StochasticRule()  # sr's default rule


def _direction(rounding: str, negative: bool) -> str:
    """How a magnitude moves: 'down' (toward 0), 'up', nearest with ties to the even code ('ne'), away
    from zero ('na') or toward zero ('nz'), to the odd code ('odd'), or 'sr'."""
    if rounding == "rtz":
        return "down"
    if rounding == "rup":
        return "down" if negative else "up"
    if rounding == "rdn":
        return "up" if negative else "down"
    if rounding == "rnm":  # ties toward -Inf: away from zero for negatives
        return "na" if negative else "nz"
    if rounding == "rnp":  # ties toward +Inf: away from zero for positives
        return "nz" if negative else "na"
    return {"rne": "ne", "rna": "na", "rnz": "nz", "rto": "odd", "sr": "sr"}[rounding]


def _toward_finite(how: str, side: _Side) -> bool:
    """Does rounding ``how`` stop at max finite past it (no overflow value)? Toward zero always; to
    odd where max finite's code is odd."""
    return how == "down" or (how == "odd" and side.parity[side.n] == 1)


def _round_side(
    a: np.ndarray,
    side: _Side,
    how: str,
    *,
    rbits: np.ndarray | None = None,
    src: str = "float64",
    stochastic: StochasticRule = _PROPORTIONAL,
) -> tuple[np.ndarray, np.ndarray]:
    """Index into ``side`` (n + 1 means overflow) and exactness, for magnitudes ``a``."""
    v = side.mag
    n = side.n
    i = np.searchsorted(v, a, side="right") - 1
    below = i < 0  # only E8M0 has a smallest value above zero
    ic = np.clip(i, 0, n + 1)
    exact = ~below & (ic <= n) & (v[ic] == a) & side.mag_exact[ic]
    if how == "down":
        idx = ic
    elif how == "up":
        idx = np.where(exact | below, ic, ic + 1)
    elif how in ("ne", "na", "nz"):
        hi = np.minimum(ic + 1, n + 1)
        im = np.minimum(ic, n)
        mid, mid_exact = side.mid[im], side.mid_exact[im]
        tie = (a == mid) & mid_exact & (ic <= n)
        go_up = ((a > mid) | ((a == mid) & ~mid_exact)) & ~exact  # past the midpoint's key is past it
        if how == "na":
            go_up |= tie
        elif how == "ne":
            go_up |= tie & (side.parity[hi] == 0)
        idx = np.where((ic <= n) & ~below, ic + go_up, ic)
    elif how == "odd":  # inexact: the neighbour with the odd code (the one beyond max included)
        up = ~exact & ~below & (side.parity[np.minimum(ic, n + 1)] == 0)
        idx = np.where(ic <= n, ic + up, n + 1)
    else:  # "sr"
        assert rbits is not None
        idx = np.where((ic <= n) & ~below, ic + _stochastic_up(a, side, ic, rbits, src, stochastic), ic)
    return idx, exact


def _stochastic_up(a: np.ndarray, side: _Side, ic: np.ndarray, rbits: np.ndarray, src: str,
                   stochastic: StochasticRule) -> np.ndarray:
    """Whether each magnitude, a fraction of the way from mag[ic] to the next value, goes up under the
    stochastic rule (policy.py: truncated, offset, nearest, equal) with its N random bits."""
    n = side.n
    im = np.minimum(ic, n)
    gap_exp = side.gap_exp[im]
    # exact: a - mag[ic] by Sterbenz (or mag[ic] = 0), and the gap is a power of two. An inexact a
    # lies where the format's values are float64s: where they are not, every float64 is one of them.
    with np.errstate(over="ignore", invalid="ignore"):  # beyond max (ic = n + 1) the fraction is not read
        frac = np.where(ic <= n, np.ldexp(a - side.mag[im], -gap_exp), 0.0)
    r = rbits.astype(np.uint64)
    if stochastic.rule == "equal":
        return (frac > 0) & (r & np.uint64(1) == 1)
    if stochastic.bits is None:  # every source bit the rounding discards, up to 32
        st = SOURCE_TYPES[src]
        _, e_a = np.frexp(a)
        ulp_exp = np.maximum(e_a - 1, st.emin) - (st.precision - 1)
        d = np.clip(gap_exp - ulp_exp, 0, 32).astype(np.uint64)
        r = r & ((np.uint64(1) << d) - np.uint64(1))
    else:
        d = np.full(a.shape, stochastic.bits, dtype=np.uint64)
    one = np.uint64(1)
    if stochastic.rule == "offset":  # floor(v 2^(N+1)) + 2R + 1 >= 2^(N+1)
        scaled = np.floor(np.ldexp(frac, (d + one).astype(np.int64))).astype(np.uint64)
        return scaled + (r << one) + one >= (one << (d + one))
    scaled_f = np.ldexp(frac, d.astype(np.int64))  # exact: frac has at most 53 significant bits
    if stochastic.rule == "nearest":  # v 2^N to nearest, ties to even
        scaled = np.rint(scaled_f).astype(np.uint64)
    else:
        scaled = np.floor(scaled_f).astype(np.uint64)
    return scaled + r >= (one << d)


def encode_f64(
    x: np.ndarray,
    pol: Resolved,
    *,
    rbits: np.ndarray | None = None,
    src: str = "float64",
    want_flags: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact encode of float64 values (1-D); returns (codes as fmt.code_dtype, uint8 flags or None).

    NaN inputs under nan='raise' get a placeholder code: callers check first.
    ``src`` names the type the values came from; it matters only for ``sr``.
    """
    x = np.asarray(x, dtype=np.float64)
    if pol.on_nan.sign_dropped:  # the source conversion lost the NaN's sign
        x = np.where(np.isnan(x), np.abs(x), x)
    pre_inexact = None
    if pol.via.type is not None:  # double rounding: first into the intermediate type
        y = to_intermediate(x, pol.via.type, pol.via.carry).astype(np.float64)
        pre_inexact = ~np.isnan(x) & (y != x)
        x, src, pol = y, pol.via.type, pol.without_intermediate()
    fmt = pol.fmt
    if fmt.name == "e8m0" and pol.e8m0.encoding == "signed_exponent":
        return _e8m0_signed_exponent(x, pol, want_flags)
    x_in = x
    x, as_inf = _nans_as_inf(x, pol)
    negative_in = np.signbit(x)
    if fmt.name == "e8m0" and pol.e8m0.negative == "abs":
        x = np.where(np.isnan(x), x, np.abs(x))
    codes = np.zeros(x.shape, dtype=np.int64)
    flags = np.zeros(x.shape, dtype=np.uint8) if want_flags else None
    _encode_finite(x, pol, codes, flags, rbits, src)
    _encode_infinite(x, pol, codes, flags)
    _encode_nans(x, pol, codes, flags)
    if pol.on_input.neg_zero == "positive":  # an exact -0.0 input written as +0
        codes[(x == 0) & np.signbit(x)] = 0
    _underflow_rule(x, pol, codes, flags)
    if fmt.name == "e8m0":  # no sign, zero or Inf: each has its policy
        _e8m0_specials(x, negative_in, pol, codes, flags)
    if flags is not None:
        if as_inf is not None and as_inf.any():  # a NaN input: invalid unless still NaN
            flags[as_inf] = nan_input_flags(codes[as_inf], x_in[as_inf].view(np.uint64), "float64", pol)
        if pol.flags.neg_zero == "inexact" and _loses_zero_sign(fmt):
            flags[(x == 0) & np.signbit(x)] |= FLAG_INEXACT
        if pre_inexact is not None:
            flags |= np.where(pre_inexact, FLAG_INEXACT, 0).astype(np.uint8)
    return codes.astype(fmt.code_dtype), flags


def _underflow_rule(x: np.ndarray, pol: Resolved, codes: np.ndarray, flags: np.ndarray | None) -> None:
    """subnormal_flush, then neg_underflow, on the codes of finite inputs (pol.on_underflow)."""
    fmt, rule = pol.fmt, pol.on_underflow
    if rule.flush != "none":
        assert fmt.min_normal is not None  # UnderflowRule.check: a float format with subnormals
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(x) & (x != 0) & (fmt.signed | ~np.signbit(x))
            if rule.flush == "inputs":
                flushed = finite & (np.abs(x) < float(fmt.min_normal))
            else:
                got = magnitude_keys(fmt)[0][codes]
                flushed = finite & (got > 0) & (got < float(fmt.min_normal))
        negative = np.signbit(x) & fmt.has_neg_zero
        codes[flushed] = np.where(negative[flushed], fmt.sign_mask, 0)
        if flags is not None:
            flags[flushed] = FLAG_INEXACT | FLAG_UNDERFLOW
    if rule.negative_zero == "positive" and fmt.has_neg_zero:
        # a negative nonzero input whose code is -0 gets +0's (0)
        codes[(codes == fmt.sign_mask) & (x < 0)] = 0


def _nans_as_inf(x: np.ndarray, pol: Resolved) -> tuple[np.ndarray, np.ndarray | None]:
    """Under nan='as_inf' (for either sign) such NaNs become the Inf of their sign and take its path;
    returns the inputs so changed and which ones were (None: no mode asks)."""
    rule = pol.on_nan
    if "as_inf" not in (rule.mode, rule.negative):
        return x, None
    sign = np.signbit(x)
    as_inf = np.isnan(x) & np.where(sign, rule.negative == "as_inf", rule.mode == "as_inf")
    return np.where(as_inf, np.where(sign, -np.inf, np.inf), x), as_inf


def _encode_finite(x: np.ndarray, pol: Resolved, codes: np.ndarray, flags: np.ndarray | None,
                   rbits: np.ndarray | None, src: str) -> None:
    """Finite inputs, one sign at a time: rounded onto that side's codes, then the overflow rule."""
    fmt = pol.fmt
    negative = np.signbit(x)
    a = np.abs(x)
    finite = np.isfinite(x)
    nonsat = not pol.on_overflow.saturating
    for side, negative_side in zip(_sides(fmt, pol.on_overflow.mode == "satsym"), (False, True), strict=True):
        sel = finite & (negative if negative_side else ~negative)
        if side is None or not sel.any():
            continue
        how = _direction(pol.rounding, negative_side)
        ai = a[sel]
        idx, exact = _round_side(ai, side, how, rbits=None if rbits is None else rbits[sel], src=src,
                                 stochastic=pol.stochastic)
        over = idx > side.n
        if pol.on_overflow.when == "before":  # beyond max finite before rounding
            over |= ai > side.mag[side.n]
        c = side.codes[np.minimum(idx, side.n)]
        if nonsat and not _toward_finite(how, side):
            c = np.where(over, _overflow_nan(pol, side.overflow_code, negative_side), c)
        codes[sel] = c
        if flags is not None:
            flags[sel] = _finite_flags(ai, pol, side, negative_side, how, idx, exact, over, c)
        if negative_side and not fmt.signed and pol.on_overflow.unsigned_negative == "nan":
            _unsigned_negatives(ai, pol, sel, how, rbits, src, codes, flags)


def _unsigned_negatives(ai: np.ndarray, pol: Resolved, sel: np.ndarray, how: str, rbits: np.ndarray | None,
                        src: str, codes: np.ndarray, flags: np.ndarray | None) -> None:
    """unsigned_negative='nan': a negative input (magnitudes ``ai``, at ``sel``) rounded by its magnitude
    on the format's own grid, as a negative rounds; a nonzero result is the NaN (invalid), zero stays."""
    fmt = pol.fmt
    pos_side = _sides(fmt)[0]
    idx, exact = _round_side(ai, pos_side, how, rbits=None if rbits is None else rbits[sel], src=src,
                             stochastic=pol.stochastic)
    nonzero = idx > 0
    codes[np.flatnonzero(sel)[nonzero]] = fmt.nan_codes[0]
    if flags is not None:
        flags[sel] = np.where(nonzero, FLAG_INVALID, np.where(ai > 0, FLAG_INEXACT | FLAG_UNDERFLOW, 0))


def _finite_flags(ai: np.ndarray, pol: Resolved, side: _Side, negative_side: bool, how: str, idx: np.ndarray,
                  exact: np.ndarray, over: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The flags of finite inputs (magnitudes ``ai``) of one side rounded to index ``idx``, code ``c``."""
    fmt = pol.fmt
    f = np.where(exact, 0, FLAG_INEXACT)
    if pol.flags.overflow == "infinite":  # flagged only when the result is not a number
        f |= np.where(over & np.isin(c, fmt.inf_codes + fmt.nan_codes), FLAG_OVERFLOW, 0)
    else:
        f |= np.where(over, FLAG_OVERFLOW, 0)
    f |= np.where(over & (c == side.codes[-1]), FLAG_SATURATED, 0)
    if fmt.kind == "float" and fmt.min_normal is not None:
        mn = float(fmt.min_normal)
        tiny = (ai > 0) & (ai < mn) & ~exact
        if pol.flags.tininess == "after":
            tiny &= ~_reaches_min_normal(ai, mn, fmt.man_bits + 1, how, side.mag[np.minimum(idx, side.n)])
        elif pol.flags.tininess == "result":  # the result itself below the smallest normal
            tiny &= side.mag[np.minimum(idx, side.n)] < mn
        f |= np.where(tiny, FLAG_UNDERFLOW, 0)
    if negative_side and not fmt.signed:  # unsigned: clamped to zero, not rounded
        f = np.where(ai > 0, FLAG_INEXACT | FLAG_SATURATED, 0)
    return f


def _encode_infinite(x: np.ndarray, pol: Resolved, codes: np.ndarray, flags: np.ndarray | None) -> None:
    """+-Inf inputs, under the input rule's ``inf`` and the overflow mode."""
    fmt = pol.fmt
    isinf = np.isinf(x)
    if not isinf.any():
        return
    negative = np.signbit(x)
    for side, negative_side in zip(_sides(fmt, pol.on_overflow.mode == "satsym"), (False, True), strict=True):
        sel = isinf & (negative if negative_side else ~negative)
        if side is None or not sel.any():
            continue
        how = pol.on_input.inf
        if negative_side and not fmt.signed:  # unsigned: -Inf clamps to zero, or is the NaN
            c = fmt.nan_codes[0] if pol.on_overflow.unsigned_negative == "nan" else int(side.codes[-1])
        elif how == "nan":
            c = _overflow_nan(pol, _quiet_nan(fmt, negative_side), negative_side)
        elif how == "max":
            c = int(side.codes[-1])
        elif how == "zero":
            c = int(side.codes[0])
        elif how == "infinite" and fmt.has_inf:
            c = min(fmt.inf_codes) | (fmt.sign_mask if negative_side else 0)
        elif not pol.on_overflow.saturating:
            c = _overflow_nan(pol, side.overflow_code, negative_side)
        else:
            c = int(side.codes[-1])
        codes[sel] = c
        if flags is not None:
            flags[sel] = inf_input_flags(c, pol)


def _encode_nans(x: np.ndarray, pol: Resolved, codes: np.ndarray, flags: np.ndarray | None) -> None:
    """NaN inputs under the NaN rule (the modes that read the payload read float64's)."""
    isnan = np.isnan(x)
    if not isnan.any():
        return
    if {"payload_rounded", "payload", "quiet_payload"} & {pol.on_nan.mode, pol.on_nan.negative}:
        with np.errstate(invalid="ignore"):
            nan_out = payload_nan_codes(x[isnan].view(np.uint64), "float64", pol)
    else:
        nan_out = _nan_code(pol, np.signbit(x)[isnan])
    codes[isnan] = nan_out
    if flags is not None:
        with np.errstate(invalid="ignore"):
            flags[isnan] = nan_input_flags(nan_out, x[isnan].view(np.uint64), "float64", pol)


def _loses_zero_sign(fmt: Format) -> bool:
    """A float format whose zero has no sign (FNUZ, UE4M3): a -0 input loses it."""
    return fmt.kind == "float" and fmt.has_zero and not fmt.has_neg_zero and fmt.name != "e8m0"


def inf_input_flags(code: int, pol: Resolved) -> int:
    """The flags of an Inf input that became ``code``."""
    fmt = pol.fmt
    if code in fmt.inf_codes:
        return 0
    if code in fmt.nan_codes:
        return FLAG_INVALID if pol.flags.inf_nan == "invalid" else FLAG_INEXACT
    return FLAG_INEXACT | FLAG_SATURATED if pol.flags.inf_number == "inexact" else 0


def nan_input_flags(codes: np.ndarray, bits: np.ndarray, src: str, pol: Resolved) -> np.ndarray:
    """The flags of NaN inputs (their bit patterns in ``src``) that became ``codes``: invalid
    when they became a number or Inf, or, under flag_nan='signaling', when they are signalling."""
    if pol.flags.nan == "signaling":
        quiet = bits.astype(np.uint64) & np.uint64(source_type(src).quiet_bit)
        return np.where(quiet == 0, FLAG_INVALID, 0).astype(np.uint8)
    return np.where(np.isin(codes, pol.fmt.nan_codes), 0, FLAG_INVALID).astype(np.uint8)


def _reaches_min_normal(a: np.ndarray, mn: float, p: int, how: str, result: np.ndarray) -> np.ndarray:
    """Tininess after rounding: does ``a`` (0 < a < mn) round to mn at precision ``p``
    with an unbounded exponent? Only a > mn (1 - 2^-p), the last step below mn, can."""
    with np.errstate(divide="ignore"):  # mn is 0.0 where the smallest normal is below float64 (no a is tiny)
        t = a / mn  # exact: a power-of-two scale
    if how in ("ne", "na"):  # the tie (1 - 2^-(p+1)) goes to the even neighbour mn
        return t >= 1 - 2.0 ** -(p + 1)
    if how == "nz":
        return t > 1 - 2.0 ** -(p + 1)
    if how == "up":
        return t > 1 - 2.0**-p
    if how in ("down", "odd"):  # the neighbour below mn, 1.11..1 * 2^(emin-1), has an odd significand
        return np.zeros(a.shape, dtype=bool)
    return result == mn  # sr: tiny unless the result is the smallest normal


def _e8m0_signed_exponent(x: np.ndarray, pol: Resolved, want_flags: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """E8M0 under e8m0_encoding='signed_exponent' (policy.py): round onto {0} and the powers of
    two 2^-127..2^127 of either sign, then pack. Its exact twin: oracle._e8m0_signed_exponent."""
    fmt = pol.fmt
    codes = np.zeros(x.shape, dtype=np.int64)
    flags = np.zeros(x.shape, dtype=np.uint8) if want_flags else None
    isnan, isinf = np.isnan(x), np.isinf(x)
    finite = ~isnan & ~isinf
    negative = np.signbit(x)
    a = np.where(finite, np.abs(x), 0.0)
    nz = finite & (a > 0)
    # the neighbours lo <= a < hi on the grid: 2^e and 2^(e+1), or 0 and 2^-127 below it
    _, e2 = np.frexp(np.where(nz, a, 1.0))
    e = e2.astype(np.int64) - 1
    tiny = nz & (e < -127)
    lo = np.where(tiny, 0.0, np.ldexp(1.0, np.maximum(e, -127)))
    with np.errstate(over="ignore"):  # 2 * 2^1023 is Inf: a float64 that far up overflows either way
        hi = np.where(tiny, 2.0**-127, 2 * lo)
        mid = (lo + hi) * 0.5
    exact = nz & (a == lo)
    up = np.zeros(x.shape, dtype=bool)
    toward_zero = np.zeros(x.shape, dtype=bool)
    for neg in (False, True):
        sel = nz & ~exact & (negative == neg)
        how = _direction(pol.rounding, neg)
        if how == "down":
            toward_zero |= nz & (negative == neg)
        elif how == "up":
            up |= sel
        elif how in ("ne", "na"):
            tie = a == mid
            # a tie goes to the even significand: every power of two's is 1, zero's is 0
            tie_up = tie if how == "na" else tie & (lo > 0)
            up |= sel & ((a > mid) | tie_up)
    r_exp = np.where(up, np.where(tiny, -127, e + 1), np.where(tiny, -128, e))  # -128: the result is 0
    beyond = nz & (r_exp > 127)
    to_nan = beyond & ~toward_zero  # toward zero an overflow stops at 2^127 (0xFE, sign or not)
    code = np.where(r_exp <= -128, 0, (np.minimum(r_exp, 127) + 127) | np.where(negative, 0x80, 0))
    codes[nz] = code[nz]
    nan_code = fmt.nan_codes[0]
    codes[to_nan] = nan_code
    codes[isnan | isinf] = nan_code
    if flags is not None:
        f = np.where(nz & (~exact | beyond), FLAG_INEXACT, 0).astype(np.uint8)  # past the top is never exact
        f |= np.where(nz & ~exact & (r_exp <= -128), FLAG_UNDERFLOW, 0).astype(np.uint8)
        # flag_overflow 'infinite': flagged only when the result is the NaN
        f |= np.where(to_nan if pol.flags.overflow == "infinite" else beyond, FLAG_OVERFLOW, 0).astype(np.uint8)
        f |= np.where(beyond & ~to_nan, FLAG_SATURATED, 0).astype(np.uint8)
        flags[:] = f
        if isinf.any():
            flags[isinf] = inf_input_flags(nan_code, pol)
        if isnan.any():
            with np.errstate(invalid="ignore"):
                flags[isnan] = nan_input_flags(codes[isnan], x[isnan].view(np.uint64), "float64", pol)
    return codes.astype(np.uint8), flags


def _e8m0_specials(x: np.ndarray, negative_in: np.ndarray, pol: Resolved, codes: np.ndarray,
                   flags: np.ndarray | None) -> None:
    """E8M0 inputs with no code of their own: negatives (and -0, -Inf), +-0, +Inf, tiny."""
    fmt = pol.fmt
    nan_code = fmt.nan_codes[0]
    notnan = ~np.isnan(x)
    clamp = FLAG_INEXACT | FLAG_SATURATED
    # (inputs, rule, whether 'min' is a rounding of the input: its flags stay)
    rules = [
        (notnan & negative_in & (pol.e8m0.negative != "abs"), pol.e8m0.negative, False),
        (notnan & (x == 0), pol.e8m0.zero, False),
        (notnan & np.isposinf(x), pol.e8m0.inf, False),
        (notnan & (x > 0) & (x < float(fmt.min_positive)), pol.e8m0.tiny, True),
    ]
    done = np.zeros(x.shape, dtype=bool)
    for sel, rule, rounded in rules:
        sel = sel & ~done
        done |= sel
        if not sel.any():
            continue
        codes[sel] = nan_code if rule == "nan" else (0 if rule == "min" else fmt.n_codes - 2)
        if flags is not None and not (rounded and rule == "min"):
            flags[sel] = FLAG_INVALID if rule == "nan" else clamp


# ---- tables -------------------------------------------------------------------------


def _threshold_shift(pol: Resolved) -> int:
    """Bits cut off a float32 pattern so that every rounding boundary is an even index."""
    s = _boundary_shift(pol)
    assert s >= 8, (pol.fmt.name, s)
    return s


def _boundary_shift(pol: Resolved) -> int:
    """The largest shift (at most 20) that keeps every rounding boundary of a format inside float32's
    range on an even index of float32 patterns."""
    mags: list[float] = []
    for side in _sides(pol.fmt, pol.on_overflow.mode == "satsym"):
        if side is None:
            continue
        v = side.mag
        mags.extend(v.tolist())
        mags.extend(((v[:-1] + v[1:]) * 0.5).tolist())
    f32max = float(np.finfo(np.float32).max)
    pats = np.array([m for m in mags if 0 < m <= f32max], dtype=np.float32).view(np.uint32)
    low = pats & -pats  # lowest set bit of each pattern
    tz = int(low.min()).bit_length() - 1  # trailing zero bits of the least aligned boundary
    return min(20, tz - 1)  # tables of 2^12..2^24 entries: the small ones stay in the L1 cache


#: a wide format's float32 table is built only up to this many entries (8 MB of uint16 codes)
_WIDE_TABLE_MAX = 1 << 22


@lru_cache(maxsize=8)
def wide_table_f32(pol: Resolved) -> tuple[np.ndarray, int] | None:
    """The float32 round-to-odd table of a format wider than a byte, where one is small enough: the
    format's values and midpoints lie inside float32's range (half the smallest and twice the largest
    included, as the byte formats' tables need) and need few enough bits (P <= 12); else None."""
    fmt = pol.fmt
    if not fmt.fits_float64 or fmt.kind != "float":
        return None
    if fmt.min_positive / 2 < Fraction(2) ** -149 or fmt.max_finite * 2 >= Fraction(2) ** 128:
        return None
    s = _boundary_shift(pol)
    if 1 << (32 - s) > _WIDE_TABLE_MAX:
        return None
    idx = np.arange(1 << (32 - s), dtype=np.uint64) << np.uint64(s)
    with np.errstate(invalid="ignore"):  # signalling-NaN patterns are quieted: fine here
        reps = idx.astype(np.uint32).view(np.float32).astype(np.float64)
    return _read_only(encode_f64(reps, pol)[0]), s


@lru_cache(maxsize=256)
def table_f32(pol: Resolved) -> tuple[np.ndarray, int]:
    """(codes for every round-to-odd index, shift s) for float32 input."""
    s = _threshold_shift(pol)
    idx = np.arange(1 << (32 - s), dtype=np.uint64) << np.uint64(s)
    with np.errstate(invalid="ignore"):  # signalling-NaN patterns are quieted: fine here
        reps = idx.astype(np.uint32).view(np.float32).astype(np.float64)
    return _read_only(encode_f64(reps, pol)[0]), s


@lru_cache(maxsize=256)
def table_16(pol: Resolved, src: str) -> np.ndarray:
    """Codes for every float16 or bfloat16 bit pattern."""
    dt = np.float16 if src == "float16" else ml_dtypes.bfloat16
    with np.errstate(invalid="ignore"):
        reps = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float64)
    return _read_only(encode_f64(reps, pol)[0])


def _read_only(codes: np.ndarray) -> np.ndarray:
    codes.flags.writeable = False
    return codes


def _bind_kernels(lib: ctypes.CDLL) -> dict[str, Any]:
    i64, i32, p = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p
    f32, f16 = lib.fmtsim_encode_f32, lib.fmtsim_encode_16
    sr32, sr64 = lib.fmtsim_sr_f32_r32, lib.fmtsim_sr_f32_r64
    f32.argtypes, f16.argtypes = [i64, p, p, i32, p], [i64, p, p, p]
    sr32.argtypes = sr64.argtypes = [i64, p, p, i32, p, i64, p, p, i32, i32, i32, i32, i32, p, p]
    dec, rne = lib.fmtsim_decode_u8, lib.fmtsim_encode_f32_rne
    dec.argtypes, rne.argtypes = [i64, p, p, p], [i64, p, p, i32, p]
    f32.restype = f16.restype = sr32.restype = sr64.restype = dec.restype = rne.restype = None
    return {"f32": f32, "16": f16, "sr32": sr32, "sr64": sr64, "decode": dec, "rne": rne}


_KERNELS = Library("fmtsim", "codec_kernels", "the element encode and decode kernels",
                   ("fmtsim_encode_f32", "fmtsim_encode_16", "fmtsim_sr_f32_r32", "fmtsim_sr_f32_r64",
                    "fmtsim_decode_u8", "fmtsim_encode_f32_rne"),
                   _bind_kernels)


@lru_cache(maxsize=256)
def arith_params(pol: Resolved) -> np.ndarray | None:
    """The parameters of codec_kernels.cpp's fmtsim_encode_f32_rne for this policy, or None where that
    kernel does not give the table's codes (then the table lookup runs).

    Offered to signed float formats with subnormals under 'rne'; every parameter but the layout's is
    read off the policy's own table (the code of a zero, of an overflow, of Inf and of NaN, per sign),
    and the kernel is then run on one input of every round-to-odd index and compared with the table.
    Both the kernel and the table give a code that depends on the input only through that index (the
    kernel's round bit sits above the table's shift for every input whose rounding is not to zero), so
    agreement there is agreement on all 2^32 float32 inputs; anything the policy does that the kernel
    does not (overflow before rounding, a NaN code that varies with the payload) shows as a mismatch.
    """
    fmt = pol.fmt
    if not (pol.rounding == "rne" and fmt.kind == "float" and fmt.signed and fmt.subnormals and fmt.bits <= 8
            and 0 <= 127 - fmt.bias and fmt.man_bits <= 22 and _KERNELS.unavailable_reason() is None):
        return None
    table, s = table_f32(pol)
    if table.size > 1 << 20:  # the check below would cost more than it saves
        return None
    vals = fmt.values
    finite = np.flatnonzero(np.isfinite(vals[: fmt.sign_mask]))
    if finite.size == 0:
        return None
    drop = 23 - fmt.man_bits

    def at(bits: int) -> int:
        return int(table[(bits | ((bits & ((1 << s) - 1)) + (1 << s) - 1)) >> s])

    emin = 1 - fmt.bias
    magic = np.array([2.0 ** (emin - fmt.man_bits + 23)], dtype=np.float32).view(np.uint32)[0]
    p = np.array([(127 - fmt.bias) << 23, drop, (1 << (drop - 1)) - 1, (127 + emin) << 23,
                  151 - fmt.bias - fmt.man_bits, int(finite.max()), fmt.sign_mask,
                  at(0), at(0x80000000), at(0x7F7FFFFF), at(0xFF7FFFFF), at(0x7F800000), at(0xFF800000),
                  at(0x7FFFFFFF), at(0xFFFFFFFF), magic], dtype=np.uint32)
    reps = (np.arange(table.size, dtype=np.uint64) << np.uint64(s)).astype(np.uint32)
    got = np.empty(reps.size, dtype=np.uint8)
    for integer_subnormals in (0, 1):  # the kernel picks a variant by the FP rounding mode: both must agree
        _KERNELS.entry()["rne"](reps.size, reps.ctypes.data, p.ctypes.data, integer_subnormals, got.ctypes.data)
        if not np.array_equal(got, table):
            return None
    p.flags.writeable = False
    return p
_SR_RULE_CODES = {"truncated": 0, "offset": 1, "nearest": 2, "equal": 3}


@dataclass(frozen=True)
class _SrTables:
    """The compiled stochastic rounding's tables, both signs in one array each (the negative side's
    after the positive's): each round-to-odd index's toward-zero position (code values and midpoints
    sit at even indices), the magnitudes and codes at each position, and max finite's position."""

    shift: int
    below: np.ndarray  # uint16, 2 x 2^(31 - shift)
    mag: np.ndarray  # float64
    codes: np.ndarray  # uint8
    top_pos: int
    top_neg: int


@lru_cache(maxsize=64)
def _sr_tables(pol: Resolved) -> _SrTables:
    s = _threshold_shift(pol)
    with np.errstate(invalid="ignore"):  # the NaN patterns' positions are never read
        reps = (np.arange(1 << (31 - s), dtype=np.uint64) << np.uint64(s)).astype(np.uint32).view(np.float32)
        reps64 = reps.astype(np.float64)
    pos_side, neg_side = _sides(pol.fmt, pol.on_overflow.mode == "satsym")
    sides = [pos_side] + ([neg_side] if neg_side is not None and pol.fmt.signed else [])
    below, mags, codes, tops, offset = [], [], [], [], 0
    for side in sides:
        below.append(np.clip(np.searchsorted(side.mag, reps64, side="right") - 1, 0, side.n + 1) + offset)
        mags.append(side.mag)
        codes.append(np.append(side.codes, 0))  # the position past max: never written
        tops.append(offset + side.n)
        offset += side.mag.size
    if len(sides) == 1:  # unsigned: negatives are the numpy path's; their half of the table is never read
        below.append(np.zeros(reps.size, dtype=np.int64))
        tops.append(0)
    return _SrTables(s, np.concatenate(below).astype(np.uint16), np.ascontiguousarray(np.concatenate(mags)),
                     np.concatenate(codes).astype(np.uint8), tops[0], tops[1])


def decode_compiled() -> bool:
    """Whether :func:`decode_u8` runs (the kernels built here)."""
    return _KERNELS.used("auto")


def decode_u8(codes: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    """out[i] = table[codes[i]] for contiguous uint8 codes and a 256-entry float32 table (the compiled
    twin of codec.decode's np.take)."""
    _KERNELS.entry()["decode"](codes.size, codes.ctypes.data, table.ctypes.data, out.ctypes.data)


def sr_compiled(pol: Resolved, src: str) -> bool:
    """Whether :func:`encode_sr_f32` serves this policy: float32 input, no intermediate type, a float or
    integer format other than E8M0 (whose inputs without a code are their own rules), and the kernels built."""
    return (pol.rounding == "sr" and src == "float32" and pol.via.type is None and pol.fmt.name != "e8m0"
            and pol.fmt.bits <= 8 and _KERNELS.used("auto"))


def encode_sr_f32(x: np.ndarray, pol: Resolved, rbits: np.ndarray, out: np.ndarray) -> None:
    """rounding='sr' of a contiguous float32 array by the compiled kernel; the inputs it leaves (NaN,
    Inf, zero, beyond max finite, negatives into unsigned formats) by :func:`encode_f64`. The same codes
    as encode_f64 on every input (the kernel is its steps; tests/test_codec_compiled.py holds them)."""
    tb = _sr_tables(pol)
    rest = np.empty(x.size, dtype=np.uint8)
    wide = rbits.dtype != np.uint32
    r = np.ascontiguousarray(rbits, dtype=np.uint64 if wide else np.uint32)
    bits = -1 if pol.stochastic.bits is None else pol.stochastic.bits
    _KERNELS.entry()["sr64" if wide else "sr32"](
        x.size, x.ctypes.data, r.ctypes.data, tb.shift, tb.below.ctypes.data, tb.below.size // 2, tb.mag.ctypes.data,
        tb.codes.ctypes.data, tb.top_pos, tb.top_neg, int(pol.fmt.signed), _SR_RULE_CODES[pol.stochastic.rule], bits,
        out.ctypes.data, rest.ctypes.data)
    left = np.flatnonzero(rest)
    if left.size:
        out[left] = encode_f64(x[left].astype(np.float64), pol, rbits=r[left], src="float32")[0]
    if pol.on_underflow != UnderflowRule():  # the kernel's tables hold every subnormal and a negative side's -0
        codes = out.astype(np.int64)
        _underflow_rule(x.astype(np.float64), pol, codes, None)
        out[:] = codes


def odd_f64_to_f32_bits(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float64 -> float32 bit patterns rounded to odd (NaN stays NaN, Inf stays Inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        y = x.astype(np.float32)
    back = y.astype(np.float64)
    bits = y.view(np.uint32)
    moved_out = np.abs(back) > np.abs(x)
    inexact = back != x
    res = np.subtract(bits, moved_out, out=out, dtype=np.uint32)
    res |= inexact
    return res


def _f32_odd_index(u: np.ndarray, s: int, tmp: np.ndarray, out: np.ndarray) -> np.ndarray:
    # (u | ((u & mask) + mask)) >> s: the add carries into bit s exactly when a bit below it
    # is set (the sticky bit), and the OR puts it on u's bit s: u >> s with its lowest bit
    # or-ed with the sticky bit, in four passes
    mask = np.uint32((1 << s) - 1)
    np.bitwise_and(u, mask, out=tmp)
    np.add(tmp, mask, out=tmp)
    np.bitwise_or(tmp, u, out=tmp)
    np.right_shift(tmp, s, out=out)
    return out


def _encode_wide(x: np.ndarray, pol: Resolved, out: np.ndarray) -> np.ndarray:
    """Formats wider than a byte (uint16 codes). float16 and bfloat16 read a 65536-entry table built by
    the exact float64 engine; float32 and float64 read the float32 round-to-odd table where
    :func:`wide_table_f32` builds one (P <= 12 inside float32's range: binary16's and bfloat16's shapes),
    and elsewhere go through the float64 engine itself (a Binary16p16 boundary needs 17 significant
    bits, 2^26 table entries; a format beyond float32 must not see a float64 input through float32)."""
    n = x.size
    if x.dtype == np.float16 or x.dtype == ml_dtypes.bfloat16:
        table = table_16(pol, "float16" if x.dtype == np.float16 else "bfloat16")
        u16 = x.view(np.uint16)
        for i in range(0, n, CHUNK):
            np.take(table, u16[i : i + CHUNK], out=out[i : i + CHUNK], mode="wrap")
        return out
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"encode_fast: unsupported dtype {x.dtype}")
    by_table = wide_table_f32(pol)
    if by_table is not None:  # as the byte formats' numpy path: float64 rounded to odd into float32 first
        codes, s = by_table
        tmp = np.empty(min(n, CHUNK), dtype=np.uint32)
        idx = np.empty(min(n, CHUNK), dtype=np.uint32)
        u32 = np.empty(min(n, CHUNK), dtype=np.uint32)
        for i in range(0, n, CHUNK):
            m = min(CHUNK, n - i)
            u = x[i : i + m].view(np.uint32) if x.dtype == np.float32 else odd_f64_to_f32_bits(x[i : i + m], u32[:m])
            _f32_odd_index(u, s, tmp[:m], idx[:m])
            np.take(codes, idx[:m], out=out[i : i + m], mode="wrap")
        return out
    for i in range(0, n, CHUNK):
        with np.errstate(invalid="ignore"):  # widening signalling NaNs quiets them: fine
            out[i : i + CHUNK] = encode_f64(x[i : i + CHUNK].astype(np.float64), pol)[0]
    return out


def encode_fast(x: np.ndarray, pol: Resolved, out: np.ndarray, engine: str = "auto") -> np.ndarray:
    """Table-driven encode of a 1-D contiguous float16/bfloat16/float32/float64 array.

    Deterministic modes only (``sr`` goes through :func:`encode_f64`). ``engine``: 'auto' (the
    compiled lookups of codec_kernels.cpp where they build, else numpy), 'compiled' or 'numpy';
    the two give the same codes (the lookups read the same table at the same index).
    """
    n = x.size
    compiled = n > 0 and _KERNELS.used(_KERNELS.check_engine(engine, "encode_fast"))
    if pol.fmt.bits > 8:
        return _encode_wide(x, pol, out)
    # every index is inside its table by construction; mode="wrap" skips the bounds check
    if x.dtype == np.float16 or x.dtype == ml_dtypes.bfloat16:
        table = table_16(pol, "float16" if x.dtype == np.float16 else "bfloat16")
        u16 = x.view(np.uint16)
        if compiled:
            _KERNELS.entry()["16"](n, u16.ctypes.data, table.ctypes.data, out.ctypes.data)
            return out
        for i in range(0, n, CHUNK):
            np.take(table, u16[i : i + CHUNK], out=out[i : i + CHUNK], mode="wrap")
        return out
    table, s = table_f32(pol)
    arith = arith_params(pol) if compiled else None
    if x.dtype == np.float32 and compiled:
        if arith is not None:
            _KERNELS.entry()["rne"](n, x.ctypes.data, arith.ctypes.data, 0, out.ctypes.data)
        else:
            _KERNELS.entry()["f32"](n, x.ctypes.data, table.ctypes.data, s, out.ctypes.data)
        return out
    tmp = np.empty(min(n, CHUNK), dtype=np.uint32)
    idx = np.empty(min(n, CHUNK), dtype=np.uint32)
    if x.dtype == np.float32:
        u = x.view(np.uint32)
        for i in range(0, n, CHUNK):
            m = min(CHUNK, n - i)
            _f32_odd_index(u[i : i + m], s, tmp[:m], idx[:m])
            np.take(table, idx[:m], out=out[i : i + m], mode="wrap")
        return out
    if x.dtype == np.float64:
        u32 = np.empty(min(n, CHUNK), dtype=np.uint32)
        for i in range(0, n, CHUNK):
            m = min(CHUNK, n - i)
            odd_f64_to_f32_bits(x[i : i + m], out=u32[:m])
            if arith is not None:
                _KERNELS.entry()["rne"](m, u32.ctypes.data, arith.ctypes.data, 0, out[i:].ctypes.data)
                continue
            if compiled:
                _KERNELS.entry()["f32"](m, u32.ctypes.data, table.ctypes.data, s, out[i:].ctypes.data)
                continue
            _f32_odd_index(u32[:m], s, tmp[:m], idx[:m])
            np.take(table, idx[:m], out=out[i : i + m], mode="wrap")
        return out
    raise TypeError(f"encode_fast: unsupported dtype {x.dtype}")
