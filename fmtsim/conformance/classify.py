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
    subnormal flush      the answer is a nonzero value below the format's smallest normal
                         (or the input is a subnormal of its own type) and a zero was given
    rounding direction   another rounding mode (rtz, rup, rdn, rna, rne) gives the code seen
    stochastic rounding  under sr: the other neighbour (the random bits were not applied
                         as fmtsim's rule applies them)
    double rounding      the input rounded first into a narrower IEEE type (float32,
                         float16, bfloat16), then into the format, gives the code seen
    other                none of these explains it

``fmtsim ver`` adds ``flags`` for a line whose code is right and whose flags are not. A
decode (code -> float32) mismatch is ``NaN/Inf encoding``, ``sign of zero``, ``subnormal
flush`` (a subnormal code read as zero) or ``other`` (:func:`explain_decode`).

A mismatch may fit several (a truncated value below the smallest normal is both a flush and
rtz): one rule that explains every mismatch of a file (or a conform row) names them all, else
the first that applies, in the order above, names each. Rounding direction and double
rounding name the mode and the type: 'rounding direction (rtz)', 'double rounding (float16)'.
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

from ..bitpatterns import SOURCE_TAGS, short_value
from ..formats import Format
from ..oracle import _sorted_values, encode_one, round_ieee, value_of
from ..policy import Resolved
from ..sources import SOURCE_TYPES

__all__ = ["Mismatch", "CLASSES", "RuleTally", "explain_encode", "classify_encode", "encode_classifier"]

CLASSES = ("NaN/Inf encoding", "overflow/saturation", "sign of zero", "tie", "subnormal flush",
           "rounding direction", "stochastic rounding", "double rounding", "other", "flags")
_RULE = {"rne": "RNE", "rna": "RNA", "rtz": "RTZ", "rup": "RUP", "rdn": "RDN", "sr": "SR"}
_MODE_WORDS = {"rne": "to nearest, ties to even", "rna": "to nearest, ties away from zero",
               "rtz": "toward zero (truncation)", "rup": "toward +Inf", "rdn": "toward -Inf"}
# narrower IEEE types an implementation may round through first, widest first
_INTERMEDIATES = {"float64": ("float32", "float16", "bfloat16"), "float32": ("float16", "bfloat16"),
                  "float16": (), "bfloat16": ()}


@dataclass(frozen=True)
class Mismatch:
    """The rule a wrong code breaks (one of :data:`CLASSES`) and a sentence saying how."""

    rule: str
    why: str


def _code_text(f: Format, code: int) -> str:
    if code >= f.n_codes:
        return f"{code:#04x} (not a code of {f.name})"
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


def explain_encode(value: float | Fraction, src: str, f: Format, pol: Resolved, want: int, got: int, *,
                   rbits: int = 0, who: str = "the device") -> list[Mismatch]:
    """Every rule that explains ``got`` where fmtsim gives ``want`` for ``value`` (a float read
    exactly from a ``src`` array, NaN/Inf included, or a Fraction) under ``pol``, first the one
    that names it when it stands alone; ``[other]`` when none does. Rounding modes and
    intermediate types are rules of their own ('rounding direction (rtz)', 'double rounding
    (float16)'), so that :class:`RuleTally` can find the one that explains a whole set."""
    rule = _RULE.get(pol.rounding, pol.rounding)
    gave = f"{who} gave {_code_text(f, got)}"
    expected = _code_text(f, want)
    if not 0 <= got < f.n_codes:
        return [Mismatch("other", f"{expected} expected, {gave}")]
    if isinstance(value, float) and math.isnan(value):
        return [Mismatch("NaN/Inf encoding", f"the input is NaN; {expected} is the policy's NaN code, {gave}")]
    if isinstance(value, float) and math.isinf(value):
        return [Mismatch("NaN/Inf encoding", f"the input is {'-' if value < 0 else '+'}Inf; "
                                             f"overflow={pol.on_overflow.mode} gives {expected}, {gave}")]
    v = Fraction(value)
    top = f.max_finite
    if abs(v) > top:
        return [Mismatch("overflow/saturation", f"{_num(v)} is beyond {f.name}'s largest finite magnitude "
                                                f"{_num(top)}; overflow={pol.on_overflow.mode} gives {expected}, "
                                                f"{gave}")]
    if _is_special(f, want) != _is_special(f, got):
        return [Mismatch("NaN/Inf encoding", f"{_num(v)} is inside {f.name}'s range; {rule} gives {expected}, {gave}")]
    wv, gv = value_of(want, f), value_of(got, f)
    if wv == 0 and gv == 0:
        shown = "-0" if v == 0 and math.copysign(1.0, float(value)) < 0 else _num(v)
        return [Mismatch("sign of zero", f"{shown} gives {expected}, {gave}: the zero of the other sign")]
    found: list[Mismatch] = []
    lo, hi = _neighbours(f, v, pol.on_overflow.mode == "satsym")
    if pol.rounding in ("rne", "rna") and lo is not None and hi is not None and lo != hi and 2 * v == lo + hi \
            and isinstance(gv, Fraction) and gv in (lo, hi) and gv != wv:
        away = abs(gv) > abs(v)
        picks = "the even code" if pol.rounding == "rne" else "the code away from zero"
        found.append(Mismatch("tie", f"this input is a tie between {_num(lo)} and {_num(hi)}; {rule} picks {picks} "
                                     f"{expected}, {gave} ({'ties away from zero' if away else 'ties toward zero'})"))
    src_subnormal = src in SOURCE_TYPES and 0 < abs(v) < Fraction(2) ** SOURCE_TYPES[src].emin
    tiny = f.min_normal is not None and abs(v) < f.min_normal
    if gv == 0 and wv != 0 and (src_subnormal or tiny):
        where = f"a {src} subnormal" if src_subnormal else \
            f"below {f.name}'s smallest normal {_num(Fraction(f.min_normal or 0))}"
        found.append(Mismatch("subnormal flush", f"{_num(v)} is {where}; {rule} gives {expected}, {gave}: "
                                                 "flushed to zero"))
    if pol.rounding == "sr":
        if isinstance(gv, Fraction) and gv in (lo, hi):
            found.append(Mismatch("stochastic rounding", f"{_num(v)} with random bits {rbits:#010x}: SR gives "
                                                         f"{expected}, {gave}, the other neighbour"))
    else:
        for mode in ("rtz", "rup", "rdn", "rna", "rne"):
            if mode == pol.rounding:
                continue
            code, _ = encode_one(v, f, src=src, policy=dataclasses.replace(pol, rounding=mode))
            if code == got:
                found.append(Mismatch(f"rounding direction ({mode})", f"{_num(v)}: {rule} gives {expected}, {gave}, "
                                                                      f"as rounding {_MODE_WORDS[mode]} does"))
    if pol.via.type is None:
        for inter in _INTERMEDIATES.get(src, ()):
            if SOURCE_TYPES[inter].precision <= (f.man_bits + 1 if f.kind == "float" else 0):
                continue  # a type no more precise than the format: a different conversion, not a detour
            w = round_ieee(v, inter)
            if not isinstance(w, Fraction) or w == v:
                continue
            try:
                code, _ = encode_one(w, f, src=inter, policy=pol)
            except ValueError:
                continue
            if code == got:
                found.append(Mismatch(f"double rounding ({inter})",
                                      f"{_num(v)} rounded to {inter} first is {_num(w)}, which then gives "
                                      f"{_code_text(f, got)}, what {who} gave; rounded once, {rule} gives {expected}"))
    return found or [Mismatch("other", f"{_num(v)}: {rule} gives {expected}, {gave}")]


def classify_encode(value: float | Fraction, src: str, f: Format, pol: Resolved, want: int, got: int, *,
                    rbits: int = 0, who: str = "the device") -> Mismatch:
    """The rule that names one mismatch alone (the first of :func:`explain_encode`)."""
    return explain_encode(value, src, f, pol, want, got, rbits=rbits, who=who)[0]


def explain_decode(f: Format, code: int, want_bits: int, got_bits: int, who: str = "the device") -> list[Mismatch]:
    """The rule a wrong float32 decode of ``code`` breaks (fmtsim's ``want_bits``, ``got_bits`` given)."""
    want, got = np.array([want_bits, got_bits], np.uint32).view(np.float32).astype(np.float64).tolist()
    value = _code_text(f, code).split(" ", 1)[1].strip("()")
    text = f"{f.name} code 0x{code:02X} is {value}; fmtsim decodes it to f32:0x{want_bits:08x}, {who} gave " \
           f"f32:0x{got_bits:08x} ({short_value(np.float32(got))})"
    if not (math.isfinite(want) and math.isfinite(got)):
        return [Mismatch("NaN/Inf encoding", text)]
    if want == got == 0:
        return [Mismatch("sign of zero", text)]
    if got == 0 and f.kind == "float" and f.code_fields(code)[1] == 0:
        return [Mismatch("subnormal flush", text + ": a subnormal read as zero")]
    return [Mismatch("other", text)]


class RuleTally:
    """Mismatches, each with every rule that explains it, and the rule each is counted under: the
    one rule that explains all of them when there is one (a truncating kernel's flushed subnormals
    and ties toward zero are truncation too), else each mismatch's first."""

    def __init__(self, limit: int = 10_000) -> None:  # a classification is a few exact conversions
        self.limit = limit
        self.items: list[tuple[str, list[Mismatch]]] = []
        self.unclassified = 0

    def add(self, where: str, candidates: list[Mismatch]) -> int | None:
        """Record one mismatch (``where`` prefixes its example); its index, or None past ``limit``."""
        if len(self.items) >= self.limit:
            self.unclassified += 1
            return None
        self.items.append((where, candidates))
        return len(self.items) - 1

    def chosen(self) -> list[Mismatch]:
        if not self.items:
            return []
        common = set.intersection(*({m.rule for m in c} for _, c in self.items))
        rule = next((m.rule for m in self.items[0][1] if m.rule in common), None)
        return [next(m for m in c if m.rule == rule) if rule else c[0] for _, c in self.items]

    def summary(self) -> list[tuple[str, int, str]]:
        """(rule, count, first example) per rule, most frequent first."""
        out: dict[str, list[Any]] = {}
        for (where, _), m in zip(self.items, self.chosen(), strict=True):
            cell = out.setdefault(m.rule, [0, f"{where}: {m.why}"])
            cell[0] += 1
        rows = [(rule, int(n), str(ex)) for rule, (n, ex) in out.items()]
        return sorted(rows, key=lambda r: -r[1])


def encode_classifier(pol: Resolved, src: str, who: str = "the device"
                      ) -> Callable[[Any, int, int, int], list[Mismatch]]:
    """``explain(x, want, got, rbits)`` (:func:`explain_encode`) for elements ``x`` of a ``src`` array (numpy scalars of
    float16/bfloat16/float32/float64), under ``pol`` (already specialised or not)."""
    dt = SOURCE_TAGS[next(t for t, (_, n) in SOURCE_TAGS.items() if n == src)][0]
    p = pol.for_source(src)

    def classify(x: Any, want: int, got: int, rbits: int = 0) -> list[Mismatch]:
        a = np.asarray(x).reshape(1).astype(dt)
        with np.errstate(invalid="ignore"):
            value = float(a.astype(np.float64)[0])
        return explain_encode(value, src, p.fmt, p, want, got, rbits=rbits, who=who)
    return classify
