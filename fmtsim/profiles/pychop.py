"""``pychop``: pychop 0.6.2 (Carson and Chen), its NumPy code paths: the ``Chop`` front end, the classic
``Chop_`` of ``pychop.np`` (``float_point.py``, a port of Higham and Pranesh's MATLAB chop), and the
P3109 module (``p3109_encode``/``p3109_decode``).

``Chop(exp_bits, sig_bits, rmode)`` (LightChop) emulates an IEEE-style format: bias 2^(e-1) - 1,
the top exponent kept for Inf and NaN. ``Chop(4, 3)`` is the IEEE-style E4M3 (``e4m3ieee``, max 240;
not OCP's E4M3), ``Chop(5, 2)`` OCP's E5M2, ``Chop(3, 4)`` the IEEE-style E3M4, and ``Chop(5, 10)``
and ``Chop(8, 7)`` IEEE binary16 and bfloat16 (the user formats ``e5m10b15_ieee`` and
``e8m7b127_ieee``, uint16 codes). Its modes, read off
pychop/np/lightchop.py and checked on every float16 pattern and 2^18 random float32 patterns:

    rmode 1  rne     nearest, ties to even (np.round)
    rmode 2  rup     toward +Inf
    rmode 3  rdn     toward -Inf
    rmode 4  rtz     toward zero
    rmode 7  rnm     documented "ties to zero"; it rounds the magnitude with floor for a positive
                     and floor + 1 for a negative: ties toward -Inf (fmtsim's rnm)
    rmode 8  rnp     documented "ties away"; the same mirror image makes it ties toward +Inf (fmtsim's
                     rnp)
    rmode 9  rto     to odd
    rmode 5, 6, 10   stochastic (proportional, equal) and CADNA random directed rounding: random
                     numbers from a per-instance generator no value can be passed to; not held

A NaN input gives +NaN whatever its sign (``nan='positive'``), Inf gives Inf (``nonsat``), the input
-0.0 gives +0 (``neg_zero_input='positive'``; a negative that rounds to zero keeps its -0). With
``subnormal=False`` every input below the smallest normal gives a zero of its sign, whatever the
mode (``subnormal_flush='inputs'``, profile ``pychop_chop_ftz``).

``Chop_(prec, rmode, customs=Customs(t, emax))`` (float_point) describes a target by its precision t
and emax (emin = 1 - emax): the presets ``q43`` (t 4, emax 7: ``e4m3ieee``) and ``q52`` (t 3, emax
15: ``e5m2``), ``Customs(t=5, emax=3)`` for ``e3m4`` and the binary16 preset ``h`` (t 11, emax 15:
``e5m10b15_ieee``) and the bfloat16 preset ``b`` (``e8m7b127_ieee``), each with ``subnormal=True``:
``b`` alone defaults to no subnormals (as MATLAB chop's bfloat16), rounding below the smallest normal
onto 0 and 2^-126, a format fmtsim does not model, so that default is not held. Its modes
1-4 are rne, rup, rdn and rtz (IEEE 754 overflow: ±max toward the finite side); a NaN keeps its sign
(``nan='signed'``), and it writes every zero result as +0 (``neg_zero_input='positive'`` for the
input -0.0 and ``neg_underflow='positive'`` for a negative that rounds to zero). Its stochastic
modes take ``randfunc``, the uniform random numbers, so they are held too: mode 5 (proportional) is
up exactly when its random number u <= v (v the distance to the neighbour toward zero, in ulps);
given u = (2^N - R) / 2^N that is fmtsim's ``sr`` with ``sr_rule='truncated'``, ``sr_bits=N`` and R
(profile ``pychop_float_point_sr``, N = 16); its overflow clamps finite values to ±max and keeps
±Inf (``satfinite`` with ``inf='infinite'``). Mode 6 (equal probabilities) is up exactly when u <=
1/2: given u = 1/4 for an odd R and 3/4 for an even one, ``sr_rule='equal'``
(``pychop_float_point_sr_equal``), with its overflow at the round-to-nearest boundary (``nonsat``).

``p3109_encode(x, P3109Format(k, precision, signed, domain), rounding=..., saturate=...)`` writes
IEEE P3109 codes: its six deterministic modes are the report's, fmtsim.p3109.projection's, and
``saturate`` False / True / "propagate" are SatNone / SatFinite / SatPropagate (profiles
``pychop_p3109_satnone`` etc.; the rounding is each entry point's). Its stochastic_a/b/c take the
random bits (``srbits``, ``srnumbits``): StochasticA/B/C with N = 8 bits under SatFinite
(``pychop_p3109_stochastic_a`` etc.). Where pychop reads SatNone otherwise than fmtsim (and gfloat)
do, the named divergences ``pychop.p3109_*`` say how.
"""

from __future__ import annotations

from ..formats import Format
from ..p3109 import projection
from ..policy import Policy
from . import Provenance, Variant

#: ``Chop(exp_bits, sig_bits)``'s formats fmtsim holds, by fmtsim's name
CHOP_FORMATS: dict[str, tuple[int, int]] = {"e4m3ieee": (4, 3), "e5m2": (5, 2), "e3m4": (3, 4),
                                             "e5m10b15_ieee": (5, 10), "e8m7b127_ieee": (8, 7)}
#: its deterministic rmodes -> fmtsim's rounding mode
CHOP_MODES: dict[int, str] = {1: "rne", 2: "rup", 3: "rdn", 4: "rtz", 7: "rnm", 8: "rnp", 9: "rto"}
#: ``Chop_``'s (float_point) formats: the preset (or "" for Customs) and its (t, emax)
FLOAT_POINT_FORMATS: dict[str, tuple[str, int, int]] = {"e4m3ieee": ("q43", 4, 7), "e5m2": ("q52", 3, 15),
                                                        "e3m4": ("", 5, 3), "e5m10b15_ieee": ("h", 11, 15),
                                                        "e8m7b127_ieee": ("b", 8, 127)}
FLOAT_POINT_MODES: dict[int, str] = {1: "rne", 2: "rup", 3: "rdn", 4: "rtz"}
#: the random bits fmtsim's sr rule reads for Chop_'s stochastic modes (u = (2^N - R) / 2^N)
FLOAT_POINT_SR_BITS = 16
#: p3109_encode's deterministic modes -> the report's names (fmtsim.p3109.ROUNDING)
P3109_MODES: dict[str, str] = {"nearest_even": "NearestTiesToEven", "nearest_away": "NearestTiesToAway",
                               "toward_zero": "TowardZero", "toward_positive": "TowardPositive",
                               "toward_negative": "TowardNegative", "to_odd": "ToOdd"}
#: its ``saturate`` values -> the report's saturation modes
P3109_SATURATIONS: dict[str, str] = {"none": "SatNone", "finite": "SatFinite", "propagate": "SatPropagate"}
P3109_STOCHASTIC: dict[str, str] = {"stochastic_a": "StochasticA", "stochastic_b": "StochasticB",
                                    "stochastic_c": "StochasticC"}
P3109_SR_BITS = 8

_PROVENANCE = Provenance("pychop NumPy backend (Chop, np.Chop_, p3109_encode)", version="0.6.2", date="2026-12-04")


# (a format without a NaN, which none of pychop's here is, refuses NaN inputs: nan='raise')

def _chop(fmt: Format) -> Policy:
    return Policy("rne", "nonsat", "positive" if fmt.has_nan else "raise", neg_zero_input="positive")


def _chop_ftz(fmt: Format) -> Policy:
    # (a format without subnormals, which none of Chop's is, has nothing to flush)
    flushes = fmt.kind == "float" and fmt.subnormals and fmt.man_bits > 0
    return Policy("rne", "nonsat", "positive" if fmt.has_nan else "raise", neg_zero_input="positive",
                  subnormal_flush="inputs" if flushes else None)


def _float_point(fmt: Format) -> Policy:
    return Policy("rne", "nonsat", "signed" if fmt.has_nan else "raise", neg_zero_input="positive",
                  neg_underflow="positive")


def _float_point_sr(fmt: Format) -> Policy:
    return Policy("sr", "satfinite", "signed" if fmt.has_nan else "raise", inf="infinite", neg_zero_input="positive",
                  neg_underflow="positive", sr_rule="truncated", sr_bits=FLOAT_POINT_SR_BITS)


def _float_point_sr_equal(fmt: Format) -> Policy:
    return Policy("sr", "nonsat", "signed" if fmt.has_nan else "raise", neg_zero_input="positive",
                  neg_underflow="positive", sr_rule="equal")


VARIANTS = (
    Variant("pychop_chop", _PROVENANCE, otherwise=_chop),
    Variant("pychop_chop_ftz", _PROVENANCE, otherwise=_chop_ftz),
    Variant("pychop_float_point", _PROVENANCE, otherwise=_float_point),
    Variant("pychop_float_point_sr", _PROVENANCE, otherwise=_float_point_sr),
    Variant("pychop_float_point_sr_equal", _PROVENANCE, otherwise=_float_point_sr_equal),
    *(Variant(f"pychop_p3109_{sat.lower()}", _PROVENANCE, otherwise=projection("NearestTiesToEven", sat))
      for sat in P3109_SATURATIONS.values()),
    *(Variant(f"pychop_p3109_{mode}", _PROVENANCE, otherwise=projection(name, "SatFinite", P3109_SR_BITS))
      for mode, name in P3109_STOCHASTIC.items()),
)
