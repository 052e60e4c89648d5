"""Why a scalar conversion's result differs from fmtsim's: the rule a mismatch breaks.

``fmtsim ver`` and ``fmtsim conform`` name, for every wrong code of an encode or a
format-to-format conversion, the rule that explains it, decided with the exact oracle
(fmtsim.oracle) on the input's exact value:

    NaN/Inf encoding     the input is NaN or Inf, or one of the two codes is a NaN or an
                         Inf where the other is not (for an input inside the range)
    overflow/saturation  the input lies beyond the format's largest finite magnitude
    sign of zero         both codes are zeros, of opposite signs
    tie                  the input is exactly halfway between two neighbours and the other
                         neighbour was given (ties away from zero, or toward it)
    double rounding      the input rounded first into a narrower IEEE type (float32,
                         float16, bfloat16), then into the format, gives the code seen
    subnormal flush      the answer is a nonzero value below the format's smallest normal
                         (or the input is a subnormal of its own type) and a zero was given
    rounding direction   another rounding mode (rtz, rup, rdn, rna, rne) gives the code seen
    stochastic rounding  under sr: the other neighbour (the random bits were not applied
                         as fmtsim's rule applies them)
    other                none of these explains it

``fmtsim ver`` adds ``flags`` for a line whose code is right and whose flags are not.

The first rule that applies, in this order, names the mismatch.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..bitpatterns import SOURCE_TAGS
from ..formats import Format
from ..oracle import _sorted_values, encode_one, round_ieee, value_of
from ..policy import Resolved

__all__ = ["Mismatch", "CLASSES", "classify_encode", "encode_classifier"]

CLASSES = ("NaN/Inf encoding", "overflow/saturation", "sign of zero", "tie", "double rounding",
           "subnormal flush", "rounding direction", "stochastic rounding", "other", "flags")
_RULE = {"rne": "RNE", "rna": "RNA", "rtz": "RTZ", "rup": "RUP", "rdn": "RDN", "sr": "SR"}
_MODE_WORDS = {"rne": "to nearest, ties to even", "rna": "to nearest, ties away from zero",
               "rtz": "toward zero (truncation)", "rup": "toward +Inf", "rdn": "toward -Inf"}
# narrower IEEE types an implementation may round through first, widest first
_INTERMEDIATES = {"float64": ("float32", "float16", "bfloat16"), "float32": ("float16", "bfloat16"),
                  "float16": (), "bfloat16": ()}
_PRECISION = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
_MIN_NORMAL = {"float64": Fraction(2) ** -1022, "float32": Fraction(2) ** -126, "float16": Fraction(2) ** -14,
               "bfloat16": Fraction(2) ** -126}


@dataclass(frozen=True)
class Mismatch:
    """The rule a wrong code breaks (one of :data:`CLASSES`) and a sentence saying how."""

    rule: str
    why: str


def _code_text(f: Format, code: int) -> str:
    if code >= f.n_codes:
        return f"{code:#04x} (not a {f.name} code)"
    v = value_of(code, f)
    if isinstance(v, str):
        return f"0x{code:02X} ({v.lstrip('+')})"
    if v == 0 and f.kind == "float" and f.signed and code >> (f.bits - 1):
        return f"0x{code:02X} (-0)"
    return f"0x{code:02X} ({_num(v)})"


def _num(v: Fraction) -> str:
    x = float(v)
    return str(int(x)) if x == int(x) and abs(x) < 2**53 else repr(x)


def _is_special(f: Format, code: int) -> bool:
    return code >= f.n_codes or isinstance(value_of(code, f), str)


def _neighbours(f: Format, v: Fraction, symmetric: bool) -> tuple[Fraction | None, Fraction | None]:
    vals = _sorted_values(f, symmetric)
    k = bisect.bisect_left(vals, v)
    if k < len(vals) and vals[k] == v:
        return v, v
    return (vals[k - 1] if k > 0 else None), (vals[k] if k < len(vals) else None)


def classify_encode(value: float | Fraction, src: str, f: Format, pol: Resolved, want: int, got: int, *,
                    rbits: int = 0, nan_bits: int | None = None, who: str = "the device") -> Mismatch:
    """The rule that explains ``got`` where fmtsim gives ``want`` for ``value`` (a float read
    exactly from a ``src`` array, NaN/Inf included, or a Fraction) under ``pol``."""
    rule = _RULE.get(pol.rounding, pol.rounding)
    gave = f"{who} gave {_code_text(f, got)}"
    expected = _code_text(f, want)
    if isinstance(value, float) and math.isnan(value):
        return Mismatch("NaN/Inf encoding", f"the input is NaN; {expected} is the policy's NaN code, {gave}")
    if isinstance(value, float) and math.isinf(value):
        return Mismatch("NaN/Inf encoding", f"the input is {'-' if value < 0 else '+'}Inf; overflow={pol.overflow} "
                                            f"gives {expected}, {gave}")
    v = Fraction(value)
    top = f.max_finite
    if abs(v) > top:
        return Mismatch("overflow/saturation", f"{_num(v)} is beyond {f.name}'s largest finite magnitude {_num(top)}; "
                                               f"overflow={pol.overflow} gives {expected}, {gave}")
    if _is_special(f, want) != _is_special(f, got):
        return Mismatch("NaN/Inf encoding", f"{_num(v)} is inside {f.name}'s range; {rule} gives {expected}, {gave}")
    wv, gv = value_of(want, f), value_of(got, f) if got < f.n_codes else None
    if wv == 0 and gv == 0:
        return Mismatch("sign of zero", f"{'-0' if math.copysign(1.0, float(value)) < 0 and v == 0 else _num(v)} "
                                        f"gives {expected}, {gave}: the zero of the other sign")
    lo, hi = _neighbours(f, v, pol.overflow == "satsym")
    if pol.rounding in ("rne", "rna") and lo is not None and hi is not None and lo != hi and 2 * v == lo + hi \
            and isinstance(gv, Fraction) and gv in (lo, hi) and gv != wv:
        away = abs(gv) > abs(v)
        picks = "the even code" if pol.rounding == "rne" else "the code away from zero"
        return Mismatch("tie", f"this input is a tie between {_num(lo)} and {_num(hi)}; {rule} picks {picks} "
                               f"{expected}, {gave} ({'ties away from zero' if away else 'ties toward zero'})")
    if pol.intermediate is None:
        for inter in _INTERMEDIATES.get(src, ()):
            if _PRECISION[inter] <= (f.man_bits + 1 if f.kind == "float" else 0):
                continue  # a type no more precise than the format: a different conversion, not a detour
            w = round_ieee(v, inter)
            if not isinstance(w, Fraction) or w == v:
                continue
            try:
                code, _ = encode_one(w, f, src=inter, policy=pol)
            except ValueError:
                continue
            if code == got:
                return Mismatch("double rounding", f"{_num(v)} rounded to {inter} first is {_num(w)}, which then "
                                                   f"gives {_code_text(f, got)}, what {who} gave; rounded once, "
                                                   f"{rule} gives {expected}")
    src_subnormal = src in _MIN_NORMAL and 0 < abs(v) < _MIN_NORMAL[src]
    tiny = f.min_normal is not None and abs(v) < f.min_normal
    if gv == 0 and wv != 0 and (src_subnormal or tiny):
        where = f"a {src} subnormal" if src_subnormal else \
            f"below {f.name}'s smallest normal {_num(Fraction(f.min_normal or 0))}"
        return Mismatch("subnormal flush", f"{_num(v)} is {where}; {rule} gives {expected}, {gave}: flushed to zero")
    if pol.rounding == "sr":
        if isinstance(gv, Fraction) and gv in (lo, hi):
            return Mismatch("stochastic rounding", f"{_num(v)} with random bits {rbits:#010x}: SR gives {expected}, "
                                                   f"{gave}, the other neighbour")
    else:
        for mode in ("rtz", "rup", "rdn", "rna", "rne"):
            if mode == pol.rounding:
                continue
            code, _ = encode_one(v, f, src=src, policy=dataclasses.replace(pol, rounding=mode))
            if code == got:
                return Mismatch("rounding direction", f"{_num(v)}: {rule} gives {expected}, {gave}, as rounding "
                                                      f"{_MODE_WORDS[mode]} ({mode}) does")
    return Mismatch("other", f"{_num(v)}: {rule} gives {expected}, {gave}")


def encode_classifier(pol: Resolved, src: str, who: str = "the device"
                      ) -> Callable[[Any, int, int, int], Mismatch]:
    """``classify(x, want, got, rbits)`` for elements ``x`` of a ``src`` array (numpy scalars of
    float16/bfloat16/float32/float64), under ``pol`` (already specialised or not)."""
    dt = SOURCE_TAGS[next(t for t, (_, n) in SOURCE_TAGS.items() if n == src)][0]
    p = pol.for_source(src)

    def classify(x: Any, want: int, got: int, rbits: int = 0) -> Mismatch:
        a = np.asarray(x).reshape(1).astype(dt)
        with np.errstate(invalid="ignore"):
            value = float(a.astype(np.float64)[0])
        return classify_encode(value, src, p.fmt, p, want, got, rbits=rbits, who=who)
    return classify
