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

from dataclasses import dataclass
from functools import cache, lru_cache

import ml_dtypes
import numpy as np

from .formats import Format
from .policy import Resolved

__all__ = [
    "FLAG_INEXACT",
    "FLAG_UNDERFLOW",
    "FLAG_OVERFLOW",
    "FLAG_INFINITE",
    "FLAG_INVALID",
    "FLAG_SATURATED",
    "SOURCE_KINDS",
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

# precision (significant bits) and smallest normal exponent of each source type
SOURCE_KINDS = {
    "float16": (11, -14),
    "bfloat16": (8, -126),
    "float32": (24, -126),
    "float64": (53, -1022),
}

CHUNK = 1 << 16  # elements per pass: keeps temporaries in cache and scratch memory bounded


@dataclass(frozen=True)
class _Side:
    """The codes of one sign, ordered by magnitude, plus the next value beyond max.

    ``mag[n + 1]`` is the value the format would have after its max if its
    exponent were unbounded: rounding there means overflow.
    """

    mag: np.ndarray  # float64, length n + 2
    codes: np.ndarray  # int64, length n + 1
    parity: np.ndarray  # int64 code LSBs, length n + 2 (last: the next value's)
    overflow_code: int  # what nonsat overflow, and an infinite input under nonsat, produce

    @property
    def n(self) -> int:
        return len(self.codes) - 1


@cache
def _sides(fmt: Format, symmetric: bool = False) -> tuple[_Side, _Side | None]:
    vals = fmt.values
    codes = np.arange(fmt.n_codes)
    finite = np.isfinite(vals)
    negbit = (codes & fmt.sign_mask) != 0 if fmt.signed else np.zeros(fmt.n_codes, bool)
    if fmt.kind == "int":
        negbit = vals < 0
    pos = finite & ~negbit
    neg = finite & negbit
    if fmt.kind == "int" and fmt.signed:
        neg = neg | (vals == 0)  # zero is on both sides of a two's complement grid
    if not fmt.has_neg_zero and fmt.has_zero:
        # FNUZ: -0 and tiny negatives -> 0x00; unsigned formats clamp negatives to 0
        neg = neg | (finite & (vals == 0))
    if symmetric:
        lowest = vals[finite].min()
        neg &= vals != lowest

    def make(mask: np.ndarray, negative: bool) -> _Side:
        c = codes[mask]
        m = np.abs(vals[mask])
        order = np.argsort(m, kind="stable")
        c, m = c[order], m[order]
        top = m[-1]
        if fmt.kind == "int":
            step = 2.0**fmt.scale_exp
        elif top == 0:
            step = float(fmt.min_positive)
        else:  # one ulp of the top binade; frexp reads the exponent exactly
            step = 2.0 ** (int(np.frexp(top)[1]) - 1 - fmt.man_bits)
        ext = np.append(m, top + step)
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
        return _Side(ext, c.astype(np.int64), par.astype(np.int64), int(ovf))

    pos_side = make(pos, False)
    neg_side = make(neg, True) if neg.any() else None
    return pos_side, neg_side


def _quiet_nan(fmt: Format, negative: bool) -> int:
    """The quiet NaN of a sign: top mantissa bit set (E5M2 0x7E), else all ones."""
    if fmt.specials == "fnuz":
        return fmt.nan_codes[0]
    sign = fmt.sign_mask if (negative and fmt.signed) else 0
    cands = [c for c in fmt.nan_codes if (c & fmt.sign_mask) == sign]
    if fmt.specials == "ieee":
        quiet_bit = 1 << (fmt.man_bits - 1)
        return min(c for c in cands if c & quiet_bit)
    return max(cands)


def _nan_code(pol: Resolved, negative: np.ndarray) -> np.ndarray:
    """Codes for NaN inputs (the 'raise' policy is enforced by the caller)."""
    fmt = pol.fmt
    n = pol.nan
    if n == "ml_dtypes" and fmt.has_nan:
        n = "signed"
    if n == "signed":
        return np.where(negative, _quiet_nan(fmt, True), _quiet_nan(fmt, False))
    if n == "signed_all_ones":
        if fmt.specials == "fnuz":
            return np.full(negative.shape, _quiet_nan(fmt, False))
        top = max(c for c in fmt.nan_codes if not c & fmt.sign_mask)
        return np.where(negative & fmt.signed, top | fmt.sign_mask, top)
    if n == "all_ones":
        ones = fmt.n_codes - 1
        return np.full(negative.shape, ones if ones in fmt.nan_codes else _quiet_nan(fmt, False))
    if n == "canonical":
        return np.full(negative.shape, _quiet_nan(fmt, False) if fmt.specials == "fnuz" else
                       max(c for c in fmt.nan_codes if not c & fmt.sign_mask))
    pos = _sides(fmt)[0]
    zero = int(pos.codes[0]) if pos.mag[0] == 0 else 0
    if n == "max":
        return np.full(negative.shape, int(pos.codes[-1]))
    if n == "ml_dtypes":
        negzero = zero | fmt.sign_mask if fmt.has_neg_zero else zero
        return np.where(negative, zero, negzero)
    return np.full(negative.shape, zero)  # "zero", "te"; placeholders for "raise", "torchao"


def torchao_nan_codes(bits32: np.ndarray, pol: Resolved) -> np.ndarray:
    """nan='torchao': each NaN (as float32 bits) encoded as +-1.m, m its significand field."""
    as_one = ((bits32.astype(np.uint32) & np.uint32(0x807FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
    return encode_f64(as_one.astype(np.float64), Resolved(pol.fmt, "rne", "satfinite", "zero"))[0]


def _overflow_nan(pol: Resolved, code: int, negative: bool) -> int:
    """A NaN that overflow produces is written like a NaN input under the 'canonical'
    and 'all_ones' policies (PTX, gfloat); otherwise it is the signed quiet NaN."""
    if code in pol.fmt.nan_codes and pol.nan in ("canonical", "all_ones"):
        return int(_nan_code(pol, np.array([negative]))[0])
    return code


def _direction(rounding: str, negative: bool) -> str:
    """How a magnitude moves: 'down' (toward 0), 'up', 'ne', 'na' or 'sr'."""
    if rounding == "rtz":
        return "down"
    if rounding == "rup":
        return "down" if negative else "up"
    if rounding == "rdn":
        return "up" if negative else "down"
    return {"rne": "ne", "rna": "na", "sr": "sr"}[rounding]


def _round_side(
    a: np.ndarray,
    side: _Side,
    how: str,
    *,
    rbits: np.ndarray | None = None,
    src: str = "float64",
) -> tuple[np.ndarray, np.ndarray]:
    """Index into ``side`` (n + 1 means overflow) and exactness, for magnitudes ``a``."""
    v = side.mag
    n = side.n
    i = np.searchsorted(v, a, side="right") - 1
    below = i < 0  # only E8M0 has a smallest value above zero
    ic = np.clip(i, 0, n + 1)
    exact = ~below & (ic <= n) & (v[ic] == a)
    if how == "down":
        idx = ic
    elif how == "up":
        idx = np.where(exact | below, ic, ic + 1)
    elif how in ("ne", "na"):
        hi = np.minimum(ic + 1, n + 1)
        mid = (v[ic] + v[hi]) * 0.5
        go_up = a > mid
        tie = (a == mid) & (ic <= n)
        if how == "na":
            go_up |= tie
        else:
            go_up |= tie & (side.parity[hi] == 0)
        idx = np.where((ic <= n) & ~below, ic + go_up, ic)
    else:  # "sr"
        assert rbits is not None
        hi = np.minimum(ic + 1, n + 1)
        gap = v[hi] - v[ic]
        frac = np.where((ic <= n) & ~below, (a - v[ic]) / np.where(gap > 0, gap, 1.0), 0.0)
        prec, emin_src = SOURCE_KINDS[src]
        _, e_a = np.frexp(a)
        ulp_exp = np.maximum(e_a - 1, emin_src) - (prec - 1)
        _, e_gap = np.frexp(np.where(gap > 0, gap, 1.0))
        d = np.clip((e_gap - 1) - ulp_exp, 0, 32)
        f_int = np.floor(np.ldexp(frac, d)).astype(np.uint64)
        r = rbits.astype(np.uint64) & ((np.uint64(1) << d.astype(np.uint64)) - np.uint64(1))
        go_up = (f_int + r) >= (np.uint64(1) << d.astype(np.uint64))
        idx = np.where((ic <= n) & ~below, ic + go_up, ic)
    return idx, exact


def encode_f64(
    x: np.ndarray,
    pol: Resolved,
    *,
    rbits: np.ndarray | None = None,
    src: str = "float64",
    want_flags: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact encode of float64 values (1-D); returns (uint8 codes, uint8 flags or None).

    NaN inputs under nan='raise' get a placeholder code: callers check first.
    ``src`` names the type the values came from; it matters only for ``sr``.
    """
    fmt = pol.fmt
    x = np.asarray(x, dtype=np.float64)
    codes = np.zeros(x.shape, dtype=np.int64)
    flags = np.zeros(x.shape, dtype=np.uint8) if want_flags else None
    negative = np.signbit(x)
    a = np.abs(x)
    isnan = np.isnan(x)
    isinf = np.isinf(x)
    finite = ~isnan & ~isinf
    pos_side, neg_side = _sides(fmt, pol.overflow == "satsym")

    for side, negative_side in ((pos_side, False), (neg_side, True)):
        sel = finite & (negative if negative_side else ~negative)
        if side is None or not sel.any():
            continue
        how = _direction(pol.rounding, negative_side)
        ai = a[sel]
        idx, exact = _round_side(ai, side, how, rbits=None if rbits is None else rbits[sel], src=src)
        over = idx > side.n
        c = side.codes[np.minimum(idx, side.n)]
        if pol.overflow == "nonsat" and how != "down":
            c = np.where(over, _overflow_nan(pol, side.overflow_code, negative_side), c)
        codes[sel] = c
        if flags is not None:
            f = np.where(exact, 0, FLAG_INEXACT)
            f |= np.where(over, FLAG_OVERFLOW, 0)
            saturated = over & (c == side.codes[-1])
            f |= np.where(saturated, FLAG_SATURATED, 0)
            if fmt.kind == "float" and fmt.min_normal is not None:
                tiny = (ai > 0) & (ai < float(fmt.min_normal)) & ~exact
                f |= np.where(tiny, FLAG_UNDERFLOW, 0)
            if negative_side and not fmt.signed:  # unsigned: clamped to zero, not rounded
                f = np.where(ai > 0, FLAG_INEXACT | FLAG_SATURATED, 0)
            flags[sel] = f

    # infinite inputs
    for side, negative_side in ((pos_side, False), (neg_side, True)):
        sel = isinf & (negative if negative_side else ~negative)
        if side is None or not sel.any():
            continue
        nonsat = pol.overflow == "nonsat"
        c = _overflow_nan(pol, side.overflow_code, negative_side) if nonsat else int(side.codes[-1])
        codes[sel] = c
        if flags is not None:
            is_num = c not in fmt.inf_codes and c not in fmt.nan_codes
            flags[sel] = (FLAG_INEXACT | FLAG_SATURATED) if is_num else (
                FLAG_INVALID if c in fmt.nan_codes else 0)

    # NaN inputs
    if isnan.any():
        if pol.nan == "torchao":
            with np.errstate(invalid="ignore"):
                nan_out = torchao_nan_codes(x[isnan].astype(np.float32).view(np.uint32), pol).astype(np.int64)
        else:
            nan_out = _nan_code(pol, negative[isnan])
        codes[isnan] = nan_out
        if flags is not None:
            flags[isnan] = np.where(np.isin(nan_out, fmt.nan_codes), 0, FLAG_INVALID)

    if pol.nan == "te":  # TransformerEngine's reference FP4 cast: -0.0 in, +0 out
        codes[(x == 0) & negative] = 0

    # E8M0: no sign, zero or Inf. Those inputs are NaN 0xFF (OCP MX 5.4.1).
    if fmt.name == "e8m0":
        bad = isnan | isinf | negative | (x == 0)
        codes[bad] = fmt.nan_codes[0]
        if flags is not None:
            flags[bad] = np.where(isnan[bad], 0, FLAG_INVALID)

    return codes.astype(np.uint8), flags


# ---- tables -------------------------------------------------------------------------


def _threshold_shift(pol: Resolved) -> int:
    """Bits cut off a float32 pattern so that every rounding boundary is an even index."""
    mags: list[float] = []
    for side in _sides(pol.fmt, pol.overflow == "satsym"):
        if side is None:
            continue
        v = side.mag
        mags.extend(v.tolist())
        mags.extend(((v[:-1] + v[1:]) * 0.5).tolist())
    f32max = float(np.finfo(np.float32).max)
    pats = np.array([m for m in mags if 0 < m <= f32max], dtype=np.float32).view(np.uint32)
    low = pats & -pats  # lowest set bit of each pattern
    tz = int(low.min()).bit_length() - 1  # trailing zero bits of the least aligned boundary
    s = min(16, tz - 1)
    assert s >= 8, (pol.fmt.name, s)
    return s


@lru_cache(maxsize=256)
def table_f32(pol: Resolved) -> tuple[np.ndarray, int]:
    """(codes for every round-to-odd index, shift s) for float32 input."""
    s = _threshold_shift(pol)
    idx = np.arange(1 << (32 - s), dtype=np.uint64) << np.uint64(s)
    with np.errstate(invalid="ignore"):  # signalling-NaN patterns are quieted: fine here
        reps = idx.astype(np.uint32).view(np.float32).astype(np.float64)
    codes, _ = encode_f64(reps, pol)
    codes.flags.writeable = False
    return codes, s


@lru_cache(maxsize=256)
def table_16(pol: Resolved, src: str) -> np.ndarray:
    """Codes for every float16 or bfloat16 bit pattern."""
    dt = np.float16 if src == "float16" else ml_dtypes.bfloat16
    with np.errstate(invalid="ignore"):
        reps = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float64)
    codes, _ = encode_f64(reps, pol)
    codes.flags.writeable = False
    return codes


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


def encode_fast(x: np.ndarray, pol: Resolved, out: np.ndarray) -> np.ndarray:
    """Table-driven encode of a 1-D contiguous float16/bfloat16/float32/float64 array.

    Round-to-nearest/directed modes only (``sr`` goes through :func:`encode_f64`).
    """
    n = x.size
    # every index is inside its table by construction; mode="wrap" skips the bounds check
    if x.dtype == np.float16 or x.dtype == ml_dtypes.bfloat16:
        table = table_16(pol, "float16" if x.dtype == np.float16 else "bfloat16")
        u16 = x.view(np.uint16)
        for i in range(0, n, CHUNK):
            np.take(table, u16[i : i + CHUNK], out=out[i : i + CHUNK], mode="wrap")
        return out
    table, s = table_f32(pol)
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
            _f32_odd_index(u32[:m], s, tmp[:m], idx[:m])
            np.take(table, idx[:m], out=out[i : i + m], mode="wrap")
        return out
    raise TypeError(f"encode_fast: unsupported dtype {x.dtype}")
