"""IEEE P3109's projection specifications as fmtsim policies.

The interim report (v4.0, 26 June 2026, 4.2 and 4.7.3-4.7.5) converts a value by a pair
(rounding mode, saturation mode). :func:`projection` gives that pair as a profile, a function
from a format to a :class:`~fmtsim.policy.Policy`, usable wherever ``profile=`` is::

    fmtsim.encode(x, "binary8p4se", profile=p3109.projection("ToOdd", "SatNone"))

Rounding modes, by the report's names: NearestTiesToEven (rne), NearestTiesToAway (rna),
TowardPositive (rup), TowardNegative (rdn), TowardZero (rtz), ToOdd (rto), and StochasticA,
StochasticB and StochasticC with N random bits (sr with sr_rule 'truncated', 'offset',
'nearest' and sr_bits=N; the random integers R, 0 <= R < 2^N, are ``rbits``).

Saturation modes (4.7.5), applied after rounding:

    SatFinite     every rounded value beyond the finite range, +-Inf included, clamps to the
                  extremal finite value (overflow='satfinite')
    SatPropagate  as SatFinite, but +-Inf inputs stay infinite where the format has that
                  infinity (inf='infinite')
    SatNone       Extended formats: overflow='nonsat' (+-Inf, or the extremal finite value where
                  the rounding direction goes toward it, and under ToOdd where max finite's code is
                  odd, as in every unsigned Extended format); Finite formats clamp as SatFinite
                  does (their datum set has no infinity to overflow to); unsigned formats give
                  the NaN for -Inf and for a negative that does not round to zero
                  (unsigned_negative='nan')

A NaN input is the format's one NaN under every mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal, get_args

from .formats import Format
from .policy import NanMode, Policy, RoundingMode, SrRule, UnsignedNegative

__all__ = ["ROUNDING", "SATURATION", "projection"]

SaturationMode = Literal["SatFinite", "SatPropagate", "SatNone"]
SATURATION: tuple[SaturationMode, ...] = get_args(SaturationMode)
#: the report's rounding modes: (fmtsim rounding mode, stochastic rule or None)
ROUNDING: dict[str, tuple[RoundingMode, SrRule | None]] = {
    "NearestTiesToEven": ("rne", None), "NearestTiesToAway": ("rna", None), "TowardPositive": ("rup", None),
    "TowardNegative": ("rdn", None), "TowardZero": ("rtz", None), "ToOdd": ("rto", None),
    "StochasticA": ("sr", "truncated"), "StochasticB": ("sr", "offset"), "StochasticC": ("sr", "nearest"),
}


def projection(rounding: str = "NearestTiesToEven", saturation: str = "SatFinite",
               random_bits: int | None = None) -> Callable[[Format], Policy]:
    """The profile of the projection specification (``rounding``, ``saturation``); the stochastic
    modes need ``random_bits``, N (1..32)."""
    if rounding not in ROUNDING:
        raise ValueError(f"unknown P3109 rounding mode {rounding!r}; choose one of: {', '.join(ROUNDING)}")
    if saturation not in SATURATION:
        raise ValueError(f"unknown P3109 saturation mode {saturation!r}; choose one of: {', '.join(SATURATION)}")
    mode, rule = ROUNDING[rounding]
    if rule is not None and random_bits is None:
        raise ValueError(f"{rounding} needs random_bits, the number N of random bits (R < 2^N)")
    if rule is None and random_bits is not None:
        raise ValueError(f"random_bits is for the stochastic modes, not {rounding}")

    def profile(fmt: Format) -> Policy:
        nan: NanMode = "signed" if fmt.has_nan else "raise"
        base = Policy(mode, "satfinite", nan, sr_rule=rule, sr_bits=random_bits)
        if saturation == "SatFinite":
            return base
        if saturation == "SatPropagate":
            return replace(base, inf="infinite")
        negative: UnsignedNegative | None = "nan" if not fmt.signed and fmt.kind == "float" and fmt.has_nan \
            else None
        return replace(base, overflow="nonsat" if fmt.has_inf else "satfinite", unsigned_negative=negative)

    profile.__name__ = f"p3109_{rounding}_{saturation}"
    return profile
