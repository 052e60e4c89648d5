"""``pychop``: pychop's NumPy code paths held to fmtsim's ``pychop_*`` profiles (fmtsim.profiles.pychop
says what each mode is and why):

- ``Chop(exp_bits, sig_bits, rmode)``, through the NumPy ``LightChop_`` it dispatches NumPy arrays
  to (built with a chunk size no array reaches, so that it never hands the array to Dask: the
  values are the same), into E4M3 (IEEE-style, ``e4m3ieee``), E5M2 and E3M4 (IEEE-style), under
  rmodes 1, 2, 3, 4, 7, 8 and 9;
- ``pychop.np.Chop_`` (float_point) with the presets ``q43`` (``e4m3ieee``) and ``q52`` (``e5m2``) and
  ``Customs(t=5, emax=3)`` (``e3m4``), rmodes 1-4, and its stochastic rmodes 5 and 6 with
  ``randfunc`` giving the uniform numbers fmtsim's random bits stand for (each input's bits
  R = :func:`random_bits` of its pattern, so every run is the same);
- ``p3109_encode`` under each of its six deterministic modes and three saturations, and its
  stochastic_a/b/c with ``srbits`` (R again), into the byte-wide IEEE P3109 formats (K 3..8; the
  wider ones are held by tests/test_p3109.py); ``p3109_decode`` of every code of every K 3..8 format.

pychop returns values; :func:`~fmtsim.conformance.adapters.codes_of` reads each back as the code
with that value (-1 where none has it). ``Chop`` and ``Chop_`` compute in the array's own float
type: float16 and bfloat16 inputs are given to them widened exactly to float32 (in float16 itself
pychop's log2 and scalings round far more; not held), float64 as float64. ``p3109_encode`` takes
float16, float32 and float64 (bfloat16 widened to float32).

Left out: ``Chop``'s stochastic rmodes 5 and 6 and the CADNA rmode 10 (a per-instance generator no
value can be passed to), the soft-error ``flip`` options, the torch/JAX/TensorFlow backends (other
code), and the 16-bit and wider presets. (``subnormal=False`` is held: profile ``pychop_chop_ftz``.)
Its bugs are the named divergences below; their predicates reproduce pychop's own float arithmetic
where that is where the bug lies (log2 in the array's type, a subtraction that cancels), so each
names exactly the inputs it changes.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ml_dtypes
import numpy as np

from ...codec import encode
from ...formats import Format, get_format, p3109_formats
from ...p3109 import ROUNDING
from ...profiles.pychop import (
    CHOP_FORMATS,
    CHOP_MODES,
    FLOAT_POINT_FORMATS,
    FLOAT_POINT_MODES,
    FLOAT_POINT_SR_BITS,
    P3109_MODES,
    P3109_SATURATIONS,
    P3109_SR_BITS,
    P3109_STOCHASTIC,
)
from ..adapters import Adapter, codes_of
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request

ALL_SOURCES = ("float16", "bfloat16", "float32", "float64")
# the sources of every P3109 entry point but one: every float16 pattern and the float64 boundaries
QUICK_SOURCES = ("float16", "float64")
# Chop's and Chop_'s entry points but the round-to-nearest-even ones: every bfloat16 pattern too, which
# reaches float32's range (the 2^18 random float32 patterns only under rne, to keep a run short)
CHOP_QUICK_SOURCES = ("float16", "bfloat16", "float64")
# the byte-wide P3109 formats, K 3..8 (the wider ones, K 9..16, are held to gfloat and the working
# group's tables by the test suite)
_P3109_BYTES = p3109_formats(range(3, 9))
P3109_ALL = tuple(f.name for f in _P3109_BYTES)
_P3109_UNSIGNED = tuple(f.name for f in _P3109_BYTES if not f.signed)
_P3109_FINITE = tuple(f.name for f in _P3109_BYTES if not f.has_inf)
_P3109_UNSIGNED_EXTENDED = tuple(f.name for f in _P3109_BYTES if not f.signed and f.has_inf)
# the P3109 formats every mode and saturation is held on (all 120 are held under NearestTiesToEven
# with SatFinite, and decoded): signed and unsigned, Extended and Finite, precision 1 to 7, K 4 to 8
P3109_CORE = ("binary8p3se", "binary8p4se", "binary8p4sf", "binary8p4ue", "binary8p4uf", "binary8p1ue",
              "binary8p7uf", "binary6p3se", "binary4p2uf")
_NO_DASK = 1 << 62  # LightChop_ hands an array longer than its chunk size to Dask (same values, slower)


def _host(x: np.ndarray) -> np.ndarray:
    """``x`` as pychop is given it: float32 and float64 as they are, float16 and bfloat16 widened
    exactly to float32."""
    if x.dtype == ml_dtypes.bfloat16:
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    if x.dtype == np.float16:
        return x.astype(np.float32)
    if x.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(x).copy()
    raise TypeError(f"pychop's entry points here take float16, bfloat16, float32 or float64, not {x.dtype}")


def random_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """The random integers R (0 <= R < 2^bits) both pychop and fmtsim are given for inputs ``x``:
    SplitMix64 of each input's float64 bit pattern, its top ``bits`` bits (a function of the value
    alone, so a run can be repeated and fmtsim can be given the same R)."""
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.ascontiguousarray(_host(x).astype(np.float64)).view(np.uint64).copy()
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(64 - bits)).astype(np.uint64)


def _memo(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One-entry cache keyed by the input array's identity and the other arguments: a row's
    divergences each ask for the same reproduction of pychop's arithmetic."""
    last: list[Any] = [None, None, None]

    def wrapper(x: np.ndarray, *args: Any) -> Any:
        if last[0] is x and last[1] == args:
            return last[2]
        out = fn(x, *args)
        last[:] = [x, args, out]
        return out
    return wrapper


# ---- Chop (LightChop_): the entry point and a reproduction of its float arithmetic ----

def _chop_values(x: np.ndarray, fmt: str, rmode: int, subnormal: bool = True) -> np.ndarray:
    from pychop.np import LightChop_

    e, m = CHOP_FORMATS[fmt]
    with np.errstate(all="ignore"):
        return np.asarray(LightChop_(e, m, rmode, subnormal=subnormal, chunk_size=_NO_DASK).quantize(_host(x)))


def _chop_encoder(rmode: int, subnormal: bool = True) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode_(x: np.ndarray, fmt: str) -> np.ndarray:
        return codes_of(_chop_values(x, fmt, rmode, subnormal), fmt)
    return encode_


@_memo
def _chop_model(x: np.ndarray, fmt_name: str, rmode: int,
                subnormal: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """pychop's value for each input, computed as LightChop_ computes it (in the host array's float
    type: the exponent as floor(log2(max(|x|, 1e-38))), the significand scaled by 2^-exponent, a
    subnormal as a significand below 1 in the lowest binade, or with ``subnormal=False`` a significand
    0 at exponent 0, which the normal path turns into a zero of the input's sign), and the masks of
    where its steps go wrong, for the divergences."""
    e, m = CHOP_FORMATS[fmt_name]
    a = _host(x)
    exp_max, bias = 2**e - 1, 2 ** (e - 1) - 1
    min_exp, steps = 1 - bias, 2**m
    with np.errstate(all="ignore"):
        sign = np.sign(a)
        mag = np.abs(a)
        zero, inf, nan = mag == 0, np.isinf(a), np.isnan(a)
        read = np.floor(np.log2(np.maximum(mag, 1e-38)))
        sig = mag * (2.0**-read)
        low = read < min_exp
        sig = np.where(low, mag * (1.0 / 2.0**min_exp) if subnormal else 0.0, sig)
        expo = np.where(low, min_exp if subnormal else 0, read) + bias
        overflow = expo > exp_max
        top = expo == exp_max
        expo = np.clip(expo, 0, exp_max)
        normal = (expo > 0) & (expo < exp_max)
        scaled = (sig - 1.0) * steps
        floor = np.floor(scaled)
        half = np.abs(scaled - floor - 0.5) < 1e-6  # rmodes 7 and 8 call this a tie
        if rmode == 1:
            q = np.round(scaled) * (1.0 / steps)
        elif rmode == 2:
            q = np.where(sign > 0, np.ceil(scaled), np.floor(scaled)) * (1.0 / steps)
        elif rmode == 3:
            q = np.where(sign > 0, np.floor(scaled), np.ceil(scaled)) * (1.0 / steps)
        elif rmode == 4:
            q = np.floor(scaled) * (1.0 / steps)
        elif rmode in (7, 8):
            up = np.where(sign >= 0, floor + 1, floor) if rmode == 8 else np.where(sign >= 0, floor, floor + 1)
            q = np.where(half, up, np.round(scaled)) * (1.0 / steps)
        else:
            r = np.round(scaled)
            q = np.where(r % 2 == 0, r + np.where(scaled >= r, 1, -1), r) * (1.0 / steps)
        out = np.where(normal, sign * (1.0 + q) * (2.0 ** (expo - bias)), 0.0)
        out = np.where(zero, 0.0, out)
        unit = np.where(np.isclose(sign, 0), 1.0, sign)
        out = np.where(inf, unit * np.inf, out)
        out = np.where(nan, np.nan, out)
        out = np.where(overflow & ~inf & ~nan & ~zero, unit * np.full_like(out, np.inf), out)
        finite = ~zero & ~inf & ~nan
        wide = mag.astype(np.float64)
        true_exp = np.frexp(wide)[1] - 1
        regions = {
            # the top exponent field, all ones, read as a number's: [2^(emax+1), 2^(emax+2)) gives 0, a
            # rounding that carries into it gives 2^(emax+1)
            "top": finite & (top | (np.abs(out.astype(np.float64)) == 2.0 ** (bias + 1))),
            "overflow": finite & overflow,
            "cancel": finite & (wide < 2.0**min_exp),
            "log2": finite & (read != true_exp),
            "tie": finite & (rmode in (7, 8)) & half & (scaled - floor != 0.5),
            "odd": finite & (rmode == 9) & (scaled == np.floor(scaled)),
        }
    return out, regions


_CHOP_ORDER = ("top", "overflow", "cancel", "log2", "tie", "odd")
_CHOP_TEXT = {
    "top": ("chop_top_exponent", "LightChop_ treats the exponent field 2^e - 1 (all ones, kept for Inf and NaN) as "
            "neither a number's nor an overflow: an input in [2^(emax+1), 2^(emax+2)) gives 0.0, and one whose "
            "rounding carries into that binade gives 2^(emax+1), a value the format does not have, where IEEE gives "
            "Inf (under a mode toward the finite side, ±max). E4M3 (IEEE-style, max 240): 248 <= |x| < 512 gives 256 "
            "or 0.0, 2,176 of the 65,536 float16 patterns under rne."),
    "overflow": ("chop_overflow_inf", "LightChop_ sends every input with an exponent above the format's to ±Inf "
                 "whatever the rounding mode; IEEE 754 7.4 (and fmtsim) give ±max where the mode rounds toward the "
                 "finite side (rtz, rup for negatives, rdn for positives, rto where max's code is odd)."),
    "cancel": ("chop_subnormal_cancellation", "LightChop_ rounds a subnormal as a normal number whose significand "
               "|x|/2^emin is below 1: (|x|/2^emin - 1) * 2^m in the input's own float type, a subtraction that "
               "rounds away the input's low bits, so a value just above a subnormal midpoint or step rounds as if "
               "it were on it (float32 0x3A800001, 2^-10(1 + 2^-23), gives 0 into E4M3 under rne; 2^-9 is nearest)."),
    "log2": ("chop_log2_exponent", "LightChop_ reads the exponent as floor(log2(|x|)) computed in the input's type; "
             "for a float32 input a few ulps below a power of two the logarithm rounds up to the integer, and the "
             "input is rounded as a significand below 1 in the next binade, at half the precision (under the "
             "directed modes a wrong result)."),
    "tie": ("chop_tie_tolerance", "rmodes 7 and 8 call a value a tie when its scaled fraction is within 1e-6 of "
            "one half: a float32 or float64 input one or a few ulps off a tie is rounded by the tie rule, not to "
            "the nearest neighbour."),
    "odd": ("chop_to_odd_moves_exact_values", "rmode 9 moves a value already on the grid whose last significand "
            "bit is 0 to an odd neighbour (1.0 gives 1.125 into E4M3); round to odd changes only inexact values."),
}


def _chop_label(rmode: int, subnormal: bool) -> str:
    return f"pychop.Chop[rmode={rmode}]" if subnormal else f"pychop.Chop[rmode={rmode},subnormal=False]"


def _chop_divergence(rmode: int, key: str, subnormal: bool = True) -> Divergence:
    name, text = _CHOP_TEXT[key]
    mode = CHOP_MODES[rmode]
    before = _CHOP_ORDER[:_CHOP_ORDER.index(key)]
    profile = "pychop_chop" if subnormal else "pychop_chop_ftz"

    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        values, regions = _chop_model(x, fmt.name, rmode, subnormal)
        theirs = codes_of(values, fmt)
        ours = np.asarray(encode(x, fmt, profile=profile, rounding=mode), np.int64)
        mask = regions[key] & (theirs != ours)
        for k in before:
            mask &= ~regions[k]
        return mask
    return Divergence(f"pychop.{name}", _chop_label(rmode, subnormal), tuple(CHOP_FORMATS), ALL_SOURCES, text,
                      expected)


# ---- Chop_ (float_point) ----

def _float_point(fmt: str, rmode: int, randfunc: Callable[[int], np.ndarray] | None = None) -> Any:
    from pychop import Customs
    from pychop.np import Chop_

    prec, t, emax = FLOAT_POINT_FORMATS[fmt]
    if prec:  # subnormal=True: the presets' default but for bfloat16's, which (as MATLAB chop's) has none
        return Chop_(prec=prec, rmode=rmode, randfunc=randfunc, subnormal=True)
    return Chop_(rmode=rmode, randfunc=randfunc, customs=Customs(t=t, emax=emax))


@contextmanager
def _quick_gc() -> Iterator[None]:
    """Around a Chop_ call: Chop_ calls gc.collect() on every call, whose time grows with every object
    this process holds (torch's, NumPy's, fmtsim's tables): those are frozen meanwhile (gc.freeze), so
    the collection only walks what pychop made; and Chop_'s constructor reseeds NumPy's global
    generator (np.random.seed(0)), which is put back as it was. The values are the same."""
    state = np.random.get_state()  # noqa: NPY002 (the legacy global generator is what Chop_ reseeds)
    frozen = not gc.get_freeze_count()  # a caller that froze objects of its own keeps its freeze
    if frozen:
        gc.freeze()
    try:
        yield
    finally:
        if frozen:
            gc.unfreeze()
        np.random.set_state(state)  # noqa: NPY002


def _float_point_groups(a: np.ndarray, fmt: str) -> np.ndarray:
    """Chop_'s split of the inputs (mask of its subnormal-range group, e in [emins, emin)): it draws
    one random number per element of the other group, then one per element of this one."""
    _, t, emax = FLOAT_POINT_FORMATS[fmt]
    emin = 1 - emax
    with np.errstate(invalid="ignore"):
        e = np.frexp(np.abs(a))[1] - 1
    return (e < emin) & (e >= emin + 1 - t)


def _given(u: np.ndarray) -> Callable[[int], np.ndarray]:
    """A ``randfunc`` for Chop_: the first ``n`` of the uniform numbers ``u`` (it asks once per group)."""
    def randfunc(n: int) -> np.ndarray:
        return u[:n].copy()
    return randfunc


def _float_point_encoder(rmode: int) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode_(x: np.ndarray, fmt: str) -> np.ndarray:
        a = _host(x)
        out = np.empty(a.shape, np.float64)
        if rmode in (5, 6):  # one call per group, each drawing its numbers at most once, in order
            u = _fp_uniform(x, rmode)
            sub = _float_point_groups(a, fmt)
            for group in (~sub, sub):
                if group.any():
                    given = u[group]
                    with np.errstate(all="ignore"), _quick_gc():
                        out[group] = _float_point(fmt, rmode, _given(given))(a[group])
        else:
            with np.errstate(all="ignore"), _quick_gc():
                out[:] = _float_point(fmt, rmode)(a)
        return codes_of(out, fmt)
    return encode_


def _float_point_policy(rmode: int) -> tuple[str, str | None]:
    """(profile, rounding): the stochastic rmodes are profiles of their own (their rule and bits)."""
    if rmode == 5:
        return "pychop_float_point_sr", None
    if rmode == 6:
        return "pychop_float_point_sr_equal", None
    return "pychop_float_point", FLOAT_POINT_MODES[rmode]


def _float_point_ours(x: np.ndarray, fmt: Format, rmode: int) -> np.ndarray:
    profile, mode = _float_point_policy(rmode)
    rbits = random_bits(x, FLOAT_POINT_SR_BITS) if rmode in (5, 6) else None
    with np.errstate(invalid="ignore"):  # widening a signalling NaN quiets it
        return np.asarray(encode(x, fmt, rounding=mode, profile=profile, rbits=rbits), np.int64)


def _fp_uniform(x: np.ndarray, rmode: int) -> np.ndarray:
    """The uniform numbers the stochastic entry points give Chop_ (one per input)."""
    r = random_bits(x, FLOAT_POINT_SR_BITS)
    if rmode == 5:
        return (2.0**FLOAT_POINT_SR_BITS - r.astype(np.float64)) / 2.0**FLOAT_POINT_SR_BITS
    return np.where(r & np.uint64(1), 0.25, 0.75)


def _fp_below_subnormals(rmode: int) -> Callable[[np.ndarray, Format], np.ndarray]:
    """An input below the smallest subnormal is rounded by Chop_ first to t bits at its own exponent
    (e < emins puts it in the normal group) and then flushed to 0 unless that reached the smallest
    subnormal 2^emins (rne: unless above half of it): the inputs where that gives another magnitude."""
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        _, t, emax = FLOAT_POINT_FORMATS[fmt.name]
        emins = 2 - emax - t
        with np.errstate(invalid="ignore", over="ignore"):
            a = _host(x).astype(np.float64)
            mag = np.abs(a)
            below = np.isfinite(a) & (mag > 0) & (mag < 2.0**emins) & ~_fp_tiny(rmode)(x, fmt)
            e = np.frexp(mag)[1] - 1
            y = mag * 2.0 ** (t - 1 - e)
            if rmode == 1:
                first = np.round(y) * 2.0 ** (e - (t - 1))
                theirs = np.where(first > 2.0 ** (emins - 1), 1, 0)
            elif rmode in (5, 6):
                u, frac = _fp_uniform(x, rmode), y - np.floor(y)
                up = (u <= frac) if rmode == 5 else ((u <= 0.5) & (frac != 0))
                first = np.where(up, np.ceil(y), np.floor(y)) * 2.0 ** (e - (t - 1))
                theirs = np.where(first >= 2.0**emins, 1, 0)
            else:
                return np.zeros(a.shape, bool)
            ours = _float_point_ours(x, fmt, rmode) & ~fmt.sign_mask
        return below & (theirs != ours)
    return expected


def _fp_tiny(rmode: int) -> Callable[[np.ndarray, Format], np.ndarray]:
    """float64 inputs below 2^(t - 1024): Chop_ scales them by 2^(t-1-e), which overflows to Inf, and
    the result is Inf * 0, NaN."""
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        _, t, _ = FLOAT_POINT_FORMATS[fmt.name]
        if x.dtype != np.float64:
            return np.zeros(x.shape, bool)
        with np.errstate(invalid="ignore"):
            mag = np.abs(x)
            return (mag > 0) & (mag < 2.0 ** (t - 1024))
    return expected


def _fp_negative_nan(x: np.ndarray, fmt: Format) -> np.ndarray:
    a = _host(x)
    with np.errstate(invalid="ignore"):
        return np.isnan(a) & np.signbit(a)


def _fp_float32_overflow(x: np.ndarray, fmt: Format) -> np.ndarray:
    """rmode 5, float32 arrays: an input in [2^127, 2^128) that the random number rounds up to 2^128
    (t bits at its own exponent) overflows float32 to Inf in the rescaling, and Chop_'s clamp to
    ±max leaves Inf alone."""
    a = _host(x)
    if a.dtype != np.float32:
        return np.zeros(a.shape, bool)
    _, t, _ = FLOAT_POINT_FORMATS[fmt.name]
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.abs(a.astype(np.float64))
        y = mag * 2.0 ** (t - 1 - 127)
        up = _fp_uniform(x, 5) <= y - np.floor(y)
        return np.isfinite(mag) & (mag >= 2.0**127) & up & (np.ceil(y) == 2.0**t)


def _float_point_divergences(rmode: int) -> tuple[Divergence, ...]:
    label = f"pychop.Chop_[rmode={rmode}]"
    formats = tuple(FLOAT_POINT_FORMATS)
    first: tuple[Divergence, ...] = (Divergence(
        "pychop.float_point_nan_sign", label, formats, ALL_SOURCES,
        "rmodes 1, 5 and 6 finish with sign(x) * (the rounded magnitude); for a NaN both factors are NaNs, and "
        "which one's sign the product keeps is the CPU's choice of operand, which differs between NumPy's vector "
        "loop and its scalar tail: a negative NaN comes out -NaN or +NaN by its position in the array and the "
        "array's length (in a 9-element float32 array the last element loses its sign, in an 8-element one it "
        "keeps it, on AVX2/AVX-512). The predicate is every negative NaN input, the ones whose sign may be lost: "
        "which are depends on NumPy and the CPU, not on the value.",
        _fp_negative_nan),) if rmode in (1, 5, 6) else ()
    if rmode == 5:
        first += (Divergence(
            "pychop.float_point_float32_overflow_inf", label, formats, ("float32", "bfloat16", "float16"),
            "rmode 5 on a float32 array: an input in [2^127, 2^128) whose random number rounds it up to 2^128 "
            "(at t bits of its own exponent, before the range is applied) overflows to Inf when Chop_ scales it "
            "back in float32, and its clamp of overflow to ±max (x > xmax and x != Inf) leaves the Inf: ±Inf, "
            "where fmtsim (and Chop_ on float64) gives ±max.",
            _fp_float32_overflow),)
    return first + (
        Divergence("pychop.float_point_float64_tiny_nan", label, formats, ("float64",),
                   "Chop_ scales a float64 input by 2^(t-1-e) before rounding; below 2^(t-1024) that factor "
                   "overflows to Inf and the result is Inf * 2^-(t-1-e) = Inf * 0, NaN (fmtsim: 0, or the smallest "
                   "subnormal where the mode rounds away from zero): every float64 subnormal and the tiny normals.",
                   _fp_tiny(rmode)),
        Divergence("pychop.float_point_below_subnormals", label, formats, ALL_SOURCES,
                   "an input below the smallest subnormal is rounded first to t bits at its own exponent and then "
                   "to the subnormal grid (Chop_'s two steps): under rne one that the first step puts on half the "
                   "smallest subnormal then goes to 0 although it was above half (float16 0x1401 into E4M3); under "
                   "the stochastic modes every such input is flushed to 0, where the random bits would round it up "
                   "to the smallest subnormal.",
                   _fp_below_subnormals(rmode)),
    )


# ---- p3109_encode / p3109_decode ----

def _p3109_format(fmt: str) -> Any:
    import pychop

    f = get_format(fmt)
    return pychop.P3109Format(f.bits, f.man_bits + 1, f.signed, "extended" if f.has_inf else "finite")


def _p3109_host(x: np.ndarray) -> np.ndarray:
    return _host(x) if x.dtype == ml_dtypes.bfloat16 else np.ascontiguousarray(x)


def _p3109_encoder(rounding: str, saturate: str) -> Callable[[np.ndarray, str], np.ndarray]:
    saturate_arg: Any = {"none": False, "finite": True, "propagate": "propagate"}[saturate]

    def encode_(x: np.ndarray, fmt: str) -> np.ndarray:
        import pychop

        kw: dict[str, Any] = {}
        if rounding in P3109_STOCHASTIC:
            kw = {"srbits": random_bits(x, P3109_SR_BITS), "srnumbits": P3109_SR_BITS}
        with np.errstate(all="ignore"):
            return np.asarray(pychop.p3109_encode(_p3109_host(x), _p3109_format(fmt), rounding=rounding,
                                                  saturate=saturate_arg, **kw)).astype(np.int64)
    return encode_


def _p3109_decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    import pychop

    return np.asarray(pychop.p3109_decode(np.asarray(codes, np.int64), _p3109_format(fmt)))


def _p3109_unbounded(x: np.ndarray, fmt: Format, rounding: str) -> np.ndarray:
    """p3109_quantize's rounded magnitude before its range checks (frexp and ldexp: exact)."""
    p, bias = fmt.man_bits + 1, fmt.bias
    with np.errstate(invalid="ignore", over="ignore"):
        v = _p3109_host(x).astype(np.float64)
        mag = np.abs(v)
        shift = np.maximum(np.frexp(mag)[1] - p, 2 - bias - p)
        scaled = np.ldexp(mag, -shift)
        lower = np.floor(scaled)
        if rounding == "nearest_even":
            r = np.rint(scaled)
            if p == 1:
                odd = (lower != 0) & (((shift + bias) & 1) != 0)
                r = lower + ((scaled - lower > .5) | ((scaled - lower == .5) & odd))
        elif rounding == "nearest_away":
            r = lower + (scaled - lower >= .5)
        elif rounding == "toward_zero":
            r = lower
        elif rounding == "toward_positive":
            r = np.where(v < 0, lower, np.ceil(scaled))
        elif rounding == "toward_negative":
            r = np.where(v < 0, np.ceil(scaled), lower)
        else:
            odd = (np.remainder(lower, 2) != 0) if p > 1 else ((lower != 0) & (((shift + bias) & 1) != 0))
            r = lower + ((scaled - lower > 0) & ~odd)
        return np.asarray(np.ldexp(r, shift))


def _p3109_inward(x: np.ndarray, rounding: str) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        v = _p3109_host(x).astype(np.float64)
        inward = np.isfinite(v) & (rounding in ("toward_zero", "toward_positive", "toward_negative"))
        if rounding == "toward_positive":
            inward &= v < 0
        elif rounding == "toward_negative":
            inward &= v >= 0
    return inward


def _p3109_ours(x: np.ndarray, fmt: Format, rounding: str, saturate: str) -> np.ndarray:
    return np.asarray(encode(x, fmt, profile=f"pychop_p3109_{P3109_SATURATIONS[saturate].lower()}",
                             rounding=_P3109_FMTSIM[rounding]), np.int64)


# p3109_encode's deterministic modes -> fmtsim's rounding modes (through the report's names)
_P3109_FMTSIM = {mode: ROUNDING[name][0] for mode, name in P3109_MODES.items()}


def _p3109_unsigned_inward(rounding: str, saturate: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        if fmt.signed or saturate != "none" or rounding not in ("toward_zero", "toward_positive"):
            return np.zeros(x.shape, bool)
        with np.errstate(invalid="ignore"):
            v = _p3109_host(x).astype(np.float64)
            return np.isfinite(v) & (v < 0) & (_p3109_ours(x, fmt, rounding, saturate) == fmt.nan_codes[0])
    return expected


def _p3109_finite_overflow(rounding: str, saturate: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        if fmt.has_inf or saturate != "none":
            return np.zeros(x.shape, bool)
        with np.errstate(invalid="ignore"):
            over = _p3109_unbounded(x, fmt, rounding) > float(fmt.max_finite)
            v = _p3109_host(x).astype(np.float64)
            theirs_nan = over & ~_p3109_inward(x, rounding) & (fmt.signed | (v > 0))
            return theirs_nan & (_p3109_ours(x, fmt, rounding, saturate) != fmt.nan_codes[0])
    return expected


def _p3109_odd_overflow(rounding: str, saturate: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        if fmt.signed or not fmt.has_inf or saturate != "none" or rounding != "to_odd":
            return np.zeros(x.shape, bool)
        with np.errstate(invalid="ignore"):
            v = _p3109_host(x).astype(np.float64)
            return np.isfinite(v) & (v > 0) & (_p3109_unbounded(x, fmt, rounding) > float(fmt.max_finite))
    return expected


def _p3109_divergences(rounding: str, saturate: str) -> tuple[Divergence, ...]:
    label = f"pychop.p3109[{rounding},{saturate}]"
    return (
        Divergence("pychop.p3109_unsigned_negative_inward_zero", label, _P3109_UNSIGNED, ALL_SOURCES,
                   "SatNone, unsigned formats, toward_zero and toward_positive: pychop gives 0 for a finite negative "
                   "input (rounding the value itself toward zero or +Inf reaches 0, the largest datum at or below "
                   "it); fmtsim's SatNone (4.7.5 as fmtsim and gfloat read it: unsigned_negative='nan') rounds the "
                   "magnitude and gives the NaN unless that rounds to 0.",
                   _p3109_unsigned_inward(rounding, saturate)),
        Divergence("pychop.p3109_finite_overflow_nan", label, _P3109_FINITE, ALL_SOURCES,
                   "SatNone, Finite formats: pychop gives the NaN for a value that rounds beyond the largest finite "
                   "one, and for ±Inf (\"nearest overflow produces ... NaN in finite formats\"), except under a "
                   "directed mode toward the finite range; fmtsim (and gfloat) clamp to ±max, a Finite format having "
                   "no infinity to overflow to (fmtsim.p3109: SatNone is SatFinite there).",
                   _p3109_finite_overflow(rounding, saturate)),
        Divergence("pychop.p3109_to_odd_overflow_inf", label, _P3109_UNSIGNED_EXTENDED, ALL_SOURCES,
                   "SatNone, unsigned Extended formats, to_odd: pychop gives +Inf for a value that rounds (ToOdd, "
                   "unbounded exponent) beyond the largest finite one; fmtsim gives the largest finite value, whose "
                   "code is odd there, as 4.7.5 says such formats never reach Inf under ToOdd.",
                   _p3109_odd_overflow(rounding, saturate)),
    )


def _unique(divs: Any) -> tuple[Divergence, ...]:
    seen: dict[str, Divergence] = {}
    for d in divs:
        seen.setdefault(d.name, Divergence(d.name, "pychop", d.formats, d.sources, d.description, d.expected))
    return tuple(seen.values())


# one record per name, for the documentation and the registry (each entry point holds its own, whose
# predicate is its mode's)
DIVERGENCES: tuple[Divergence, ...] = _unique(
    [_chop_divergence(9 if k == "odd" else 7, k) for k in _CHOP_ORDER]
    + list(_float_point_divergences(5)) + list(_p3109_divergences("to_odd", "none")))


class Pychop(Implementation):
    name = "pychop"
    summary = ("pychop (NumPy): Chop (LightChop) rmodes 1-4, 7-9; Chop_ (float_point) presets q43/q52/h/b and Customs, "
               "rmodes 1-6; p3109_encode (every mode and saturation) and p3109_decode")
    requires = ("pychop",)
    install = "pip install pychop==0.6.2"
    capabilities = ("decode", "encode")
    profiles = ("pychop_chop", "pychop_chop_ftz", "pychop_float_point", "pychop_float_point_sr",
                "pychop_float_point_sr_equal",
                *(f"pychop_p3109_{s.lower()}" for s in P3109_SATURATIONS.values()),
                *(f"pychop_p3109_{m}" for m in P3109_STOCHASTIC))
    divergences = DIVERGENCES
    checked_with = "pychop 0.6.2 (NumPy backend)"

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("pychop.p3109_decode", _p3109_decode, P3109_ALL)]

    def encoders(self, req: Request) -> list[Adapter]:
        out = []
        for subnormal in (True, False):  # subnormal=False: every input below the smallest normal flushed
            for rmode, mode in CHOP_MODES.items():
                every = rmode == 1 and subnormal
                out.append(Adapter(_chop_label(rmode, subnormal), _chop_encoder(rmode, subnormal),
                                   profile="pychop_chop" if subnormal else "pychop_chop_ftz",
                                   formats=tuple(CHOP_FORMATS), sources=ALL_SOURCES if every else CHOP_QUICK_SOURCES,
                                   divergences=tuple(_chop_divergence(rmode, k, subnormal) for k in _CHOP_ORDER),
                                   options={"rounding": mode}))
        for rmode in (*FLOAT_POINT_MODES, 5, 6):
            profile, fp_mode = _float_point_policy(rmode)
            out.append(Adapter(f"pychop.Chop_[rmode={rmode}]", _float_point_encoder(rmode), profile=profile,
                               formats=tuple(FLOAT_POINT_FORMATS),
                               sources=ALL_SOURCES if rmode == 1 else CHOP_QUICK_SOURCES,
                               divergences=_float_point_divergences(rmode),
                               options={} if fp_mode is None else {"rounding": fp_mode},
                               rbits=(lambda x: random_bits(x, FLOAT_POINT_SR_BITS)) if rmode in (5, 6) else None))
        for sat, sat_name in P3109_SATURATIONS.items():
            for rounding, mode in _P3109_FMTSIM.items():
                every = rounding == "nearest_even" and sat == "finite"
                out.append(Adapter(f"pychop.p3109[{rounding},{sat}]", _p3109_encoder(rounding, sat),
                                   profile=f"pychop_p3109_{sat_name.lower()}",
                                   formats=P3109_ALL if every else P3109_CORE,
                                   sources=("float64",) if every else QUICK_SOURCES,
                                   divergences=_p3109_divergences(rounding, sat), options={"rounding": mode}))
        for rounding in P3109_STOCHASTIC:
            out.append(Adapter(f"pychop.p3109[{rounding},finite]", _p3109_encoder(rounding, "finite"),
                               profile=f"pychop_p3109_{rounding}", formats=P3109_CORE, sources=QUICK_SOURCES,
                               rbits=lambda x: random_bits(x, P3109_SR_BITS)))
        return out


IMPLEMENTATIONS = [Pychop()]
