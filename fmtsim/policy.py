"""Conversion policies: rounding mode, overflow and NaN handling, and profiles.

A :class:`Policy` names every choice an encoder makes; :func:`resolve` turns
the caller's keywords (and an optional named profile) into a concrete
:class:`Resolved` policy for one format, with the codes each special case
produces. Profiles are the "specialisations" of SoftFloat: named bundles that
reproduce what a real implementation does.

Rounding modes (all exact, applied once to the input's exact value):

    rne  nearest, ties to the even code (code LSB 0). For E8M0 the code is the
         biased exponent, so a tie goes to the even biased exponent: 3 = 1.5*2^1
         lies between 2 (code 0x80) and 4 (0x81) and gives 2, whose unbiased
         exponent 1 is odd (gfloat does the same); ml_dtypes rounds E8M0 ties up,
         which is rna.
    rna  nearest, ties away from zero
    rtz  toward zero
    rup  toward +Inf
    rdn  toward -Inf
    sr   stochastic, with caller-supplied random bits (see rounding.py)

Overflow (a finite input whose rounded value, with an unbounded exponent,
exceeds max finite; rounding first, then the check, as OFP8 requires):

    satfinite  +-max finite; +-Inf inputs also become +-max finite
    nonsat     the format's own overflow value: +-Inf where it has Inf (E5M2),
               else its NaN (E4M3 0x7F/0xFF, FNUZ 0x80, E8M0 0xFF, UE4M3 0x7F).
               As IEEE 754 7.4 prescribes, a mode that rounds toward the
               finite side (rtz; rdn for positives; rup for negatives) still
               gives +-max. Formats with neither Inf nor NaN (FP4, FP6,
               integers) always saturate.
    satsym     signed integers only: saturate to the symmetric range
               +-(2^(b-1)-1) (int4 -7..7; MX INT8 +-127/64, as the reference
               MX code does).

NaN inputs (``nan=``):

    signed     formats with NaN: the quiet NaN with the input's sign (E4M3 0x7F/0xFF,
               E5M2 0x7E/0xFE, FNUZ 0x80, E8M0 0xFF, UE4M3 0x7F): what ml_dtypes does.
               The default for formats that have a NaN.
    canonical  the positive canonical NaN PTX cvt writes (E4M3 and E5M2 0x7F).
    all_ones   the code with every bit set where that is a NaN (E4M3, E5M2, E8M0 0xFF;
               UE4M3 0x7F), else the format's only NaN (FNUZ 0x80): what gfloat writes.
    signed_all_ones
               the NaN with every exponent and mantissa bit set and the input's sign
               (E4M3 and E5M2 0x7F/0xFF; FNUZ 0x80, E8M0 0xFF): what PyTorch writes.
    raise      ValueError naming the count and the first index. The default for
               formats without NaN.
    max        +max finite (PTX cvt.satfinite to e2m1/e2m3/e3m2).
    zero       +0.
    zero_sign_flipped
               'signed' for formats with NaN; for FP4/FP6 the zero whose sign is the
               opposite of the NaN's (-0 for +NaN, +0 for -NaN): what ml_dtypes 0.6 casts do.
    payload_rounded
               FP4/FP6 only: the NaN is rounded as if its exponent were that of 1.0, i.e. as
               +-1.m, m its float32 significand field, the sign kept (the quiet NaN
               0x7FC00000 gives 1.5, FP4 code 0x3): what torchao's bit casts
               (f32_to_f4_unpacked and the FP6 pair) do. Inputs of other types are read as
               numpy converts them to float32.

TransformerEngine's reference FP4 cast (NaN -> +0, and a -0.0 input -> +0 too, while negative
values that round to zero keep their sign) is ``nan='zero'`` with ``neg_zero_input='positive'``.
The names these modes had before (``ml_dtypes``, ``torchao``, ``te``) are refused with their
new name (RENAMED_NAN_MODES).

Under ``canonical`` and ``all_ones`` a NaN produced by nonsat overflow or an Inf
input is written the same way; under the others it is the quiet NaN with the
input's sign.

More NaN-input modes (the behaviours of deployed implementations):

    positive   the quiet NaN with the sign dropped (E4M3 0x7F, E5M2 0x7E).
    inf        +-Inf with the NaN's sign (formats with Inf: E5M2 0x7C/0xFC).
    signed_max +-max finite with the NaN's sign.
    neg_zero   -0 whatever the NaN's sign (formats with -0).
    payload    taken from the NaN's bit pattern in its source type: the sign, an
               all-ones exponent and the top mantissa bits of the source significand
               field. Where that pattern is not a NaN of the format it is what the
               format reads it as (E5M2: a clear top payload gives +-Inf; E4M3: +-256..448).
               IEEE-style and FN formats (E4M3, E5M2) only.
    quiet_payload
               'payload' of the NaN quieted first (its top significand bit set), as IEEE
               hardware narrows a NaN: NVIDIA's double -> E5M2 (0x7FF4... -> 0x7F).
    fixed      the code ``nan_code`` (e.g. 0x7D), its sign bit as ``nan_code_sign`` says:
               written as given (default), or the magnitude bits of ``nan_code`` with the
               NaN's sign, with the sign dropped, or with the sign forced negative.
    as_inf     converted as the Inf of the NaN's sign would be (under ``inf`` and the
               overflow mode): AMD's host cast_to_f8 into FNUZ tests only the exponent
               (+-max with saturation, 0x80 without).

OCP MX v1.0 5.4.1 defines the E8M0 *encoding* (bias 127, 0xFF the only NaN, no sign,
zero or Inf); what a conversion does with the inputs that have no code is a policy
(the ``e8m0_*`` fields below). fmtsim's default follows its own ``satfinite``
definition under saturation: out-of-range inputs clamp to the nearest end of the
range, as for the other unsigned formats: +Inf -> 0xFE (max), +-0, negatives, -Inf
and positives below 2^-127 -> 0x00 (min). Under ``nonsat`` +-Inf, +-0 and negatives are
the NaN 0xFF (ml_dtypes agrees) and positives below 2^-127 still 0x00. NaN is 0xFF
under every NaN mode but ``fixed``. Unsigned UE4M3 and unsigned integers clamp
negative inputs to 0.

The fields of :class:`Policy` beyond rounding / overflow / nan (None: the default each one
names):

    nan_negative  NaN mode for NaN inputs whose sign bit is set (default: ``nan``).
    nan_code      the code of nan='fixed' (and nan_negative='fixed').
    nan_code_sign the sign bit of that code: 'as_given' (default: ``nan_code`` verbatim),
                  'input' (its magnitude bits with the NaN's sign: NumKong's serial E5M2,
                  0x7D/0xFD), 'positive' (sign bit cleared) or 'negative' (sign bit set).
                  Signed formats only, but for 'as_given' and 'positive'.
    nan_sources   ((source, mode), ...): the NaN mode for inputs of one source type
                  ('float16', 'bfloat16', 'float32', 'float64'), overriding ``nan`` and
                  ``nan_negative`` there (onnxruntime drops the sign for bfloat16 only).
    nan_signaling_sources
                  ((source, mode), ...): the NaN mode for *signalling* NaN inputs (the top
                  significand bit of the source pattern clear) of one source type, whatever
                  their sign, overriding the modes above there. XLA decides per constant
                  which folder folds a cast: a signalling NaN sends it from StableHLO's
                  (LLVM APFloat) to XLA's HLO evaluator, whose NaN codes differ.
    nan_unsigned_sources
                  source types whose NaN inputs lose their sign before the conversion (the
                  NaN is converted as a positive NaN under every mode): AMD's half path goes
                  through a float conversion that drops it.
    overflow_nan  how a NaN *produced* by nonsat overflow or an Inf input is written:
                  'signed' (quiet NaN with the input's sign), 'positive', 'canonical',
                  'all_ones' or 'signed_all_ones'. Default: like NaN inputs under
                  nan='canonical'/'all_ones', else 'signed' (CUDA's __NV_NOSAT keeps the
                  sign on overflow while NaN inputs become 0x7F: nan='canonical',
                  overflow_nan='signed').
    overflow_check
                  'after' (default): round first, then compare with max finite (OFP8);
                  'before': a finite |x| > max finite overflows even when it would round
                  down to max (AMD's HIP host cast_to_f8: E4M3 448 < |x| <= 464 -> NaN
                  without saturation). Saturation gives +-max either way.
    inf           what +-Inf inputs become: 'overflow' (default: what overflow gives under
                  the overflow mode, +-max under satfinite), 'nan' (the overflow NaN even
                  under satfinite: HIP), 'max' (+-max whatever the mode), 'zero' (+-0:
                  LLVM APFloat into FP4/FP6).
    e8m0_negative negatives, -0 and -Inf into E8M0: 'nan' (0xFF), 'min' (0x00) or 'abs'
                  (the magnitude is converted: NVIDIA, torch). Default: 'min' under
                  satfinite, 'nan' otherwise.
    e8m0_zero     +-0 (after e8m0_negative): 'nan' or 'min'. Default as e8m0_negative.
    e8m0_inf      +Inf (after e8m0_negative): 'nan' or 'max' (0xFE). Default: 'max' under
                  satfinite, 'nan' otherwise.
    e8m0_tiny     0 < x < 2^-127: 'min' (default: 0x00, there is nothing below it) or
                  'nan' (onnxruntime without saturation).
    e8m0_encoding 'unsigned' (default, OCP MX: a code is an unsigned biased exponent; the
                  four fields above decide what has no code) or 'signed_exponent': the value
                  is rounded as a signed binary format of precision 1 with exponents
                  -127..127 and a zero (directed modes by the input's sign; under 'rne' a
                  tie goes to the neighbour whose 1-bit significand is even, so away from
                  zero except the tie at 2^-128 between 0 and 2^-127, which goes to 0), then
                  packed into 8 bits: 0 -> 0x00, 2^e -> e + 127 with the sign in bit 7 (so a
                  negative aliases a positive at or above 2, or a large value or the NaN below
                  it), overflow -> 0xFF (0xFE toward zero), +-Inf and NaN -> 0xFF. LLVM 20+
                  APFloat's Float8E8M0FNU. The four fields above do not apply.
    neg_zero_input
                  an exact -0.0 input: 'keep' (default: -0 where the format has one) or
                  'positive' (+0; TransformerEngine's reference FP4 cast).
    intermediate  None, or 'float16' / 'bfloat16' / 'float32': the input is first rounded
                  to nearest-even into that IEEE type (overflow to Inf), then converted
                  (double rounding: OpenVINO's float32 -> float16 -> FP8). Sources no wider
                  than it pass unchanged.
    intermediate_carry
                  how the rounding into ``intermediate`` treats a carry out of the
                  significand: 'exact' (default: the correctly rounded value) or
                  'doubles_subnormal': for an input below half the intermediate's smallest
                  normal whose significand, rounded to the intermediate's precision, carries
                  into the next power of two, the intermediate holds the rounding of twice the
                  input (a converter that rounds at normal precision, keeps the carried
                  exponent, and then builds the subnormal from the unrounded significand).
    tininess      'before' (default), 'after' or 'result': when the underflow flag calls an
                  inexact result tiny. 'after' (IEEE 754 7.5's alternative): the value rounded
                  to the format's precision with an unbounded exponent is below the smallest
                  normal (under 'sr', the result is not the smallest normal). 'result' (LLVM
                  APFloat): the result itself is subnormal or zero, i.e. it is not the smallest
                  normal (E4M3 0.0146484375 = 1.875 * 2^-7 rounds to 2^-6: tiny 'after', not
                  under 'result').

Flag conventions (what ``encode_with_flags`` reports; codes are unaffected):

    flag_overflow    'rounded' (default: overflow whenever the value rounded with an
                     unbounded exponent exceeds max finite, IEEE 754 7.4) or 'infinite' (only
                     when the result is Inf or NaN; a result clamped to +-max finite is just
                     inexact: LLVM APFloat).
    flag_nan         'to_number' (default: a NaN input is invalid when it becomes a number or
                     Inf) or 'signaling' (invalid exactly when it is a signalling NaN, whatever
                     it becomes, IEEE 754 7.2: LLVM APFloat).
    flag_inf_nan     an Inf input that becomes NaN: 'invalid' (default) or 'inexact' (LLVM
                     APFloat into E4M3FN and the FNUZ formats).
    flag_inf_number  an Inf input that becomes a number: 'inexact' (default; with saturated)
                     or 'none' (LLVM APFloat: +-Inf -> +-0 of FP4/FP6, exact).
    flag_neg_zero    a -0 input into a float format without -0 (FNUZ, UE4M3): 'none' (default)
                     or 'inexact' (the sign is lost: LLVM APFloat).

A profile is data: a function from a Format to a :class:`Policy`, listed in
:data:`PROFILES`. ``resolve(..., profile=...)`` takes a profile name, a Policy (the
same for every format) or such a function; explicit keywords win over it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from .formats import Format, get_format

__all__ = [
    "ROUNDING_MODES",
    "OVERFLOW_MODES",
    "NAN_MODES",
    "ROUNDING_MODE_TEXT",
    "OVERFLOW_MODE_TEXT",
    "NAN_MODE_TEXT",
    "OVERFLOW_NAN_MODES",
    "OVERFLOW_CHECKS",
    "INF_MODES",
    "E8M0_MODES",
    "INTERMEDIATES",
    "INTERMEDIATE_CARRIES",
    "E8M0_ENCODINGS",
    "TININESS",
    "NAN_CODE_SIGNS",
    "FLAG_FIELDS",
    "Policy",
    "Resolved",
    "resolve",
]

ROUNDING_MODES = ("rne", "rna", "rtz", "rup", "rdn", "sr")
OVERFLOW_MODES = ("satfinite", "nonsat", "satsym")
NAN_MODES = ("signed", "canonical", "all_ones", "signed_all_ones", "raise", "max", "zero", "zero_sign_flipped",
             "payload_rounded", "positive", "inf", "signed_max", "neg_zero", "payload", "fixed", "as_inf",
             "quiet_payload")
# what each mode does, in a line (fmtsim list rounding|overflow|nan); the module docstring in full
ROUNDING_MODE_TEXT = {"rne": "round to nearest, ties to the even code (the default)",
                      "rna": "round to nearest, ties away from zero", "rtz": "toward zero", "rup": "toward +Inf",
                      "rdn": "toward -Inf", "sr": "stochastic: your random bits (rbits=, --rbits) decide"}
OVERFLOW_MODE_TEXT = {"satfinite": "beyond the largest finite: +-max, Inf inputs too (the default)",
                      "nonsat": "beyond the largest finite: Inf, or NaN where the format has no Inf",
                      "satsym": "signed integers: +-(2^(b-1) - 1), the symmetric range"}
NAN_MODE_TEXT = {"signed": "the quiet NaN with the input's sign (the default where the format has a NaN)",
                 "canonical": "the positive canonical NaN (PTX's 0x7F)",
                 "raise": "ValueError naming the count and the first index (the default for FP4, FP6 and integers)",
                 "max": "+max finite (PTX into FP4/FP6)",
                 "zero": "+0",
                 "all_ones": "the all-ones code (gfloat)",
                 "signed_all_ones": "the all-ones code with the input's sign (PyTorch E5M2 0x7F/0xFF)",
                 "zero_sign_flipped": "FP4/FP6: +NaN -> -0, -NaN -> +0 (as ml_dtypes 0.6)",
                 "payload_rounded": "FP4/FP6: the NaN rounded as +-1.m from its float32 payload (as torchao)",
                 "positive": "the positive quiet NaN, whatever the input's sign",
                 "inf": "the infinity of the input's sign (formats with Inf)",
                 "signed_max": "+-max finite, by the input's sign",
                 "neg_zero": "-0 (formats with a -0)",
                 "payload": "the source NaN's sign and top mantissa bits kept (IEEE-style formats)",
                 "quiet_payload": "as payload, with the quiet bit set",
                 "fixed": "the NaN code a Policy names (nan_code; nan_code_sign decides its sign bit)",
                 "as_inf": "converted as the infinity of its sign would be"}
OVERFLOW_NAN_MODES = ("signed", "positive", "canonical", "all_ones", "signed_all_ones")
OVERFLOW_CHECKS = ("after", "before")
INF_MODES = ("overflow", "nan", "max", "zero")
E8M0_MODES = {
    "e8m0_negative": ("nan", "min", "abs"),
    "e8m0_zero": ("nan", "min"),
    "e8m0_inf": ("nan", "max"),
    "e8m0_tiny": ("min", "nan"),
}
E8M0_ENCODINGS = ("unsigned", "signed_exponent")
# an exact -0.0 input: its code keeps the sign where the format has a -0 ('keep'), or is +0 ('positive',
# TransformerEngine's reference FP4 cast)
NEG_ZERO_INPUTS = ("keep", "positive")
# NaN modes once named after the implementation that does them: what each is called now
RENAMED_NAN_MODES = {"ml_dtypes": "zero_sign_flipped", "torchao": "payload_rounded",
                     "te": "zero, with neg_zero_input='positive'"}
INTERMEDIATES = ("float16", "bfloat16", "float32")
INTERMEDIATE_CARRIES = ("exact", "doubles_subnormal")
TININESS = ("before", "after", "result")
FLAG_FIELDS = {
    "flag_overflow": ("rounded", "infinite"),
    "flag_nan": ("to_number", "signaling"),
    "flag_inf_nan": ("invalid", "inexact"),
    "flag_inf_number": ("inexact", "none"),
    "flag_neg_zero": ("none", "inexact"),
}
NAN_CODE_SIGNS = ("as_given", "input", "positive", "negative")
SOURCES = ("float16", "bfloat16", "float32", "float64")
# NaN modes that need the format to have a NaN code / that give a NaN code
_NAN_CODE_MODES = ("signed", "canonical", "all_ones", "signed_all_ones", "positive")


@dataclass(frozen=True)
class Policy:
    """Caller-level choices; None means "the format's or the profile's default".

    See the module docstring for every field's meaning and values."""

    rounding: str | None = None
    overflow: str | None = None
    nan: str | None = None
    nan_negative: str | None = None
    nan_code: int | None = None
    nan_sources: tuple[tuple[str, str], ...] = ()
    nan_unsigned_sources: tuple[str, ...] = ()
    overflow_nan: str | None = None
    overflow_check: str | None = None
    inf: str | None = None
    e8m0_negative: str | None = None
    e8m0_zero: str | None = None
    e8m0_inf: str | None = None
    e8m0_tiny: str | None = None
    intermediate: str | None = None
    tininess: str | None = None
    nan_code_sign: str | None = None
    nan_signaling_sources: tuple[tuple[str, str], ...] = ()
    flag_overflow: str | None = None
    flag_nan: str | None = None
    flag_inf_nan: str | None = None
    flag_inf_number: str | None = None
    flag_neg_zero: str | None = None
    intermediate_carry: str | None = None
    e8m0_encoding: str | None = None
    neg_zero_input: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A policy made concrete for one format: every field is decided.

    The first four fields are positional (``Resolved(fmt, rounding, overflow, nan)``);
    the rest default to fmtsim's behaviour before they existed. ``nan_negative`` is
    always a mode (``nan`` unless a profile split them); ``overflow_nan`` None keeps the
    historic coupling to ``nan``; the ``e8m0_*`` fields are filled in for every format."""

    fmt: Format
    rounding: str
    overflow: str
    nan: str
    nan_negative: str | None = None
    nan_code: int | None = None
    nan_sources: tuple[tuple[str, str], ...] = ()
    overflow_nan: str | None = None
    overflow_check: str = "after"
    inf: str = "overflow"
    e8m0_negative: str = "nan"
    e8m0_zero: str = "nan"
    e8m0_inf: str = "nan"
    e8m0_tiny: str = "min"
    intermediate: str | None = None
    tininess: str = "before"
    nan_unsigned_sources: tuple[str, ...] = ()
    nan_sign_dropped: bool = False  # set by for_source for a source in nan_unsigned_sources
    nan_code_sign: str = "as_given"
    nan_signaling_sources: tuple[tuple[str, str], ...] = ()
    nan_signaling: str | None = None  # set by for_source: the mode for signalling NaNs of the source
    flag_overflow: str = "rounded"
    flag_nan: str = "to_number"
    flag_inf_nan: str = "invalid"
    flag_inf_number: str = "inexact"
    flag_neg_zero: str = "none"
    intermediate_carry: str = "exact"
    e8m0_encoding: str = "unsigned"
    neg_zero_input: str = "keep"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.fmt.name, self.rounding, self.overflow, self.nan)

    @property
    def nan_neg(self) -> str:
        """The NaN mode for negative NaN inputs."""
        return self.nan if self.nan_negative is None else self.nan_negative

    def for_source(self, src: str) -> Resolved:
        """This policy for inputs of type ``src``: a per-source NaN mode applied."""
        pol = self
        if self.nan_signaling_sources:
            mode = next((m for s, m in self.nan_signaling_sources if s == src), None)
            pol = replace(pol, nan_signaling=mode, nan_signaling_sources=())
        if self.nan_unsigned_sources:
            pol = replace(pol, nan_sign_dropped=src in self.nan_unsigned_sources, nan_unsigned_sources=())
        for s, mode in self.nan_sources:
            if s == src:
                return replace(pol, nan=mode, nan_negative=None, nan_sources=())
        return pol if not pol.nan_sources else replace(pol, nan_sources=())

    def fixed_nan_code(self, negative: bool) -> int:
        """The code nan='fixed' writes for a NaN of this sign (``nan_code`` and ``nan_code_sign``)."""
        assert self.nan_code is not None
        sign = self.fmt.sign_mask if self.fmt.signed else 0
        how = self.nan_code_sign
        if how == "as_given":
            return self.nan_code
        if how == "negative" or (how == "input" and negative):
            return (self.nan_code & ~sign) | sign
        return self.nan_code & ~sign

    def without_intermediate(self) -> Resolved:
        return replace(self, intermediate=None) if self.intermediate else self


def _check_choice(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a name ({', '.join(allowed)}), not {type(value).__name__}")
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; choose one of: {', '.join(allowed)}")


Profile = Callable[[Format], Policy]


def __getattr__(name: str) -> Any:
    # PROFILES lives in fmtsim.profiles (one module per implementation), which imports this module
    if name == "PROFILES":
        from .profiles import PROFILES

        return PROFILES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _profile_policy(profile: str | Policy | Profile, f: Format) -> Policy:
    from .profiles import PROFILES

    if isinstance(profile, Policy):
        return profile
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
        return PROFILES[profile](f)
    if callable(profile):
        pol = profile(f)
        if not isinstance(pol, Policy):
            raise TypeError(f"a profile function must return a Policy, not {type(pol).__name__}")
        return pol
    raise TypeError(f"profile must be a name ({', '.join(PROFILES)}), a Policy or a function of a Format, "
                    f"not {type(profile).__name__}")


def _check_nan_mode(f: Format, n: str, field: str, nan_code: int | None) -> None:
    if isinstance(n, str) and n in RENAMED_NAN_MODES:  # modes are named for what they do, not who does it
        raise ValueError(f"{field}={n!r} is now {RENAMED_NAN_MODES[n]} (or profile={n!r}, its whole rule set)")
    _check_choice(f"{field} mode", n, NAN_MODES)
    what = f"{field}="
    if n in _NAN_CODE_MODES and not f.has_nan:
        raise ValueError(
            f"{f.name} has no NaN encoding; {what}{n!r} is impossible "
            "(use 'raise', 'max', 'zero', 'zero_sign_flipped' or 'payload_rounded')"
        )
    if n == "payload_rounded" and (f.has_nan or f.kind != "float"):
        raise ValueError(f"{f.name}: nan={n!r} reproduces an FP4/FP6 cast and applies to e2m1, e3m2 and e2m3 only")
    if n == "inf" and not f.has_inf:
        raise ValueError(f"{f.name} has no infinity; nan='inf' is impossible")
    if n == "neg_zero" and not (f.kind == "float" and f.has_neg_zero):
        raise ValueError(f"{f.name} has no -0; nan='neg_zero' is impossible")
    if n in ("payload", "quiet_payload") and f.specials not in ("ieee", "fn"):
        raise ValueError(f"{f.name}: nan={n!r} applies to IEEE-style and FN formats (e4m3, e5m2) only")
    if n == "fixed":
        if nan_code is None:
            raise ValueError("nan='fixed' needs nan_code, the code to write")
        if isinstance(nan_code, bool) or not isinstance(nan_code, int):
            raise TypeError(f"nan_code must be an int, not {type(nan_code).__name__}")
        if not 0 <= nan_code < f.n_codes:
            raise ValueError(f"nan_code {nan_code:#x} is outside {f.name}'s codes 0..{f.n_codes - 1:#x}")
    if f.name == "e8m0" and n not in _NAN_CODE_MODES + ("fixed", "as_inf"):
        raise ValueError(f"e8m0: NaN encodes to 0xFF or a fixed code; {what}{n!r} cannot apply")


def _pairs(f: Format, items: tuple[Any, ...], what: str, nan_code: int | None) -> tuple[tuple[str, str], ...]:
    """((source, NaN mode), ...) of a per-source NaN rule, each checked."""
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"{what} must be ((source, nan mode), ...) pairs")
        _check_choice(f"{what} source", item[0], SOURCES)
        _check_nan_mode(f, item[1], what, nan_code)
    return tuple(items)


def _resolve_nan(f: Format, base: Policy, nan: str | None) -> dict[str, Any]:
    """The NaN-input rules: the mode, its per-sign, per-source and signalling variants, and how a NaN code
    is written. An explicit ``nan=`` replaces the whole NaN-input choice of the profile."""
    n = nan if nan is not None else base.nan or ("signed" if f.has_nan else "raise")
    _check_nan_mode(f, n, "nan", base.nan_code)
    explicit = nan is not None
    nn = None if explicit else base.nan_negative
    if nn is not None:
        _check_nan_mode(f, nn, "nan_negative", base.nan_code)
    unsigned = tuple(base.nan_unsigned_sources)
    for src in unsigned:
        _check_choice("nan_unsigned_sources source", src, SOURCES)
    ovn = base.overflow_nan
    if ovn is not None:
        _check_choice("overflow_nan mode", ovn, OVERFLOW_NAN_MODES)
    code_sign = base.nan_code_sign or "as_given"
    _check_choice("nan_code_sign", code_sign, NAN_CODE_SIGNS)
    if code_sign in ("input", "negative") and not f.signed:
        raise ValueError(f"{f.name} has no sign bit; nan_code_sign={code_sign!r} is impossible")
    return {"nan": n, "nan_negative": nn,
            "nan_sources": () if explicit else _pairs(f, tuple(base.nan_sources), "nan_sources", base.nan_code),
            "nan_signaling_sources": () if explicit else _pairs(f, tuple(base.nan_signaling_sources),
                                                                "nan_signaling_sources", base.nan_code),
            "nan_unsigned_sources": unsigned, "overflow_nan": ovn, "nan_code_sign": code_sign}


def _resolve_specials(f: Format, base: Policy, rounding: str, saturating: bool) -> dict[str, Any]:
    """Overflow check, Inf inputs, the E8M0 special inputs and encoding, and -0.0 inputs."""
    check = base.overflow_check or "after"
    _check_choice("overflow_check", check, OVERFLOW_CHECKS)
    inf = base.inf or "overflow"
    _check_choice("inf mode", inf, INF_MODES)
    if inf == "nan" and not f.has_nan:
        raise ValueError(f"{f.name} has no NaN encoding; inf='nan' is impossible")
    if inf == "zero" and not f.has_zero:
        raise ValueError(f"{f.name} has no zero; inf='zero' is impossible")
    e8 = {
        "e8m0_negative": base.e8m0_negative or ("min" if saturating else "nan"),
        "e8m0_zero": base.e8m0_zero or ("min" if saturating else "nan"),
        "e8m0_inf": base.e8m0_inf or ("max" if saturating else "nan"),
        "e8m0_tiny": base.e8m0_tiny or "min",
    }
    for k, v in e8.items():
        _check_choice(k, v, E8M0_MODES[k])
    e8_encoding = base.e8m0_encoding or "unsigned"
    _check_choice("e8m0_encoding", e8_encoding, E8M0_ENCODINGS)
    if e8_encoding != "unsigned" and rounding == "sr" and f.name == "e8m0":
        raise ValueError("e8m0_encoding='signed_exponent' is modelled for rne, rna, rtz, rup and rdn, not sr")
    neg_zero_input = base.neg_zero_input or "keep"
    _check_choice("neg_zero_input", neg_zero_input, NEG_ZERO_INPUTS)
    return {"overflow_check": check, "inf": inf, **e8, "e8m0_encoding": e8_encoding,
            "neg_zero_input": neg_zero_input}


def _resolve_arithmetic(base: Policy) -> dict[str, Any]:
    """The intermediate type a conversion rounds through, tininess, and the flag rules."""
    inter = base.intermediate
    if inter is not None:
        _check_choice("intermediate type", inter, INTERMEDIATES)
    carry = base.intermediate_carry or "exact"
    _check_choice("intermediate_carry", carry, INTERMEDIATE_CARRIES)
    if carry != "exact" and inter is None:
        raise ValueError(f"intermediate_carry={carry!r} describes the rounding into an intermediate type; "
                         "give intermediate= too")
    tin = base.tininess or "before"
    _check_choice("tininess", tin, TININESS)
    flag_rules = {k: getattr(base, k) or allowed[0] for k, allowed in FLAG_FIELDS.items()}
    for k, v in flag_rules.items():
        _check_choice(k, v, FLAG_FIELDS[k])
    return {"intermediate": inter, "intermediate_carry": carry, "tininess": tin, **flag_rules}


def resolve(
    fmt: str | Format,
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    profile: str | Policy | Profile | None = None,
) -> Resolved:
    """Concrete policy for ``fmt``: explicit arguments win over the profile's.

    ``profile``: a name in :data:`PROFILES`, a :class:`Policy` or a function
    Format -> Policy."""
    f = get_format(fmt)
    base = Policy("rne", "satfinite", None)
    if profile is not None:
        base = _profile_policy(profile, f)
    r = rounding if rounding is not None else base.rounding or "rne"
    o = overflow if overflow is not None else base.overflow or "satfinite"
    _check_choice("rounding mode", r, ROUNDING_MODES)
    _check_choice("overflow mode", o, OVERFLOW_MODES)
    if o == "satsym" and not (f.kind == "int" and f.signed):
        raise ValueError(f"{f.name}: overflow='satsym' applies to signed integer formats only")
    nan_rules = _resolve_nan(f, base, nan)
    specials = _resolve_specials(f, base, r, o != "nonsat")
    arithmetic = _resolve_arithmetic(base)
    return Resolved(f, r, o, nan_code=base.nan_code, **nan_rules, **specials, **arithmetic)


#: every field name of a Policy, in order (for tools that print or build policies)
POLICY_FIELDS = tuple(fl.name for fl in fields(Policy))
