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
    rnz  nearest, ties toward zero (cpfloat's and pychop's mode 0 variant)
    rnm  nearest, ties toward -Inf (a tie of a positive goes down, of a negative away from zero)
    rnp  nearest, ties toward +Inf (a tie of a positive goes away from zero, of a negative toward
         it: pychop's Chop rmode 8)
    rto  to odd: an inexact result is the neighbour whose code is odd (code LSB 1; IEEE P3109
         ToOdd: for P = 1 the code is the biased exponent). Past max finite it is max finite where
         max finite's code is odd, else overflow (P3109 4.7.5: unsigned Extended formats, whose
         max finite code is odd, never reach Inf under ToOdd)
    sr   stochastic, with caller-supplied random bits R (see rounding.py): where the value lies a
         fraction v of the way from the neighbour toward zero to the one away from it, the rule
         ``sr_rule`` decides with N = ``sr_bits`` bits of R (None: every source bit the rounding
         discards, up to 32):
             truncated  up when floor(v 2^N) + R >= 2^N (the default; P3109 StochasticA)
             offset     up when floor(v 2^(N+1)) + 2R + 1 >= 2^(N+1) (P3109 StochasticB)
             nearest    up when RNITE(v 2^N) + R >= 2^N, v 2^N rounded to nearest even
                        (P3109 StochasticC)
             equal      up or down with equal probability: up when R's lowest bit is 1
                        (cpfloat's and pychop's mode 6), whatever v
         With ``sr_bits`` given, R must be below 2^N.

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
                  LLVM APFloat into FP4/FP6), 'infinite' (the Inf of its sign where the
                  format has it, else as 'overflow': P3109's SatPropagate).
    unsigned_negative
                  unsigned formats: 'zero' (default: a negative input clamps to 0) or 'nan'
                  (a negative that rounds, by its magnitude and the rounding mode, to a
                  nonzero value, and -Inf, give the NaN; one that rounds to zero gives 0:
                  P3109's SatNone, 4.7.5).
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
    neg_underflow a negative nonzero input whose result is zero: 'keep' (default: -0 where the
                  format has one, as IEEE 754 rounds) or 'positive' (+0: emulators that compute
                  a small result as (x + c) - c, or write a literal 0; qtorch, pychop's Chop_,
                  CPFloat's directed modes). With neg_zero_input='positive' every zero result
                  is +0. The flags are the rounding's (inexact, underflow) either way.
    subnormal_flush
                  'none' (default), 'inputs' (a finite nonzero input below the format's smallest
                  normal gives a zero of its sign, whatever the rounding mode: pychop's
                  subnormal=False) or 'results' (a result that would be subnormal gives a zero of
                  its sign; one that rounds up to the smallest normal stays: flush-to-zero
                  hardware). A flushed element's flags are inexact and underflow. Float formats
                  with subnormals only; the zero then follows neg_underflow.
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

What :func:`resolve` returns, a :class:`Resolved`, is the format, the rounding mode and one
frozen sub-rule per concern, each checked against the format when it is built:
``on_overflow`` (:class:`OverflowRule`: mode, ``when`` the test is made, the NaN it writes),
``on_nan`` (:class:`NanRule`: the modes by sign, source type and signalling, the fixed code),
``on_input`` (:class:`InputRule`: Inf and -0.0 inputs), ``on_underflow`` (:class:`UnderflowRule`:
subnormal flushing and the sign of an underflow's zero), ``e8m0`` (:class:`E8M0Rule`), ``via``
(:class:`IntermediateRule`: the type rounded through first and its carry rule), ``flags``
(:class:`FlagRule`, tininess included) and ``stochastic`` (:class:`StochasticRule`). Every value is
typed as a ``Literal`` (``RoundingMode``, ``NanMode``, ...), so a misspelt mode in code is a type
error; callers' strings are checked at run time by the same names. The source types' facts (field
widths, quiet bit) are :class:`fmtsim.sources.SourceType` records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any, Literal, get_args

from .formats import Format, get_format
from .sources import SOURCE_NAMES, SourceName

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
    "RoundingMode",
    "OverflowMode",
    "NanMode",
    "Policy",
    "OverflowRule",
    "NanRule",
    "InputRule",
    "UnderflowRule",
    "E8M0Rule",
    "IntermediateRule",
    "FlagRule",
    "StochasticRule",
    "SR_RULES",
    "Resolved",
    "resolve",
]

# Every choice is a Literal type (mypy catches a misspelt mode in code) and, for callers that pass
# strings, a tuple of its names checked at run time (the tuples are the Literals' arguments).
RoundingMode = Literal["rne", "rna", "rtz", "rup", "rdn", "rnz", "rnm", "rnp", "rto", "sr"]
SrRule = Literal["truncated", "offset", "nearest", "equal"]
OverflowMode = Literal["satfinite", "nonsat", "satsym"]
NanMode = Literal["signed", "canonical", "all_ones", "signed_all_ones", "raise", "max", "zero", "zero_sign_flipped",
                  "payload_rounded", "positive", "inf", "signed_max", "neg_zero", "payload", "fixed", "as_inf",
                  "quiet_payload"]
OverflowNanMode = Literal["signed", "positive", "canonical", "all_ones", "signed_all_ones"]
OverflowCheck = Literal["after", "before"]
InfMode = Literal["overflow", "nan", "max", "zero", "infinite"]
UnsignedNegative = Literal["zero", "nan"]
E8M0Negative = Literal["nan", "min", "abs"]
E8M0Zero = Literal["nan", "min"]
E8M0Inf = Literal["nan", "max"]
E8M0Tiny = Literal["min", "nan"]
E8M0Encoding = Literal["unsigned", "signed_exponent"]
NegZeroInput = Literal["keep", "positive"]
NegUnderflow = Literal["keep", "positive"]
SubnormalFlush = Literal["none", "inputs", "results"]
IntermediateType = Literal["float16", "bfloat16", "float32"]
IntermediateCarry = Literal["exact", "doubles_subnormal"]
Tininess = Literal["before", "after", "result"]
FlagOverflow = Literal["rounded", "infinite"]
FlagNan = Literal["to_number", "signaling"]
FlagInfNan = Literal["invalid", "inexact"]
FlagInfNumber = Literal["inexact", "none"]
FlagNegZero = Literal["none", "inexact"]
NanCodeSign = Literal["as_given", "input", "positive", "negative"]

ROUNDING_MODES: tuple[RoundingMode, ...] = get_args(RoundingMode)
OVERFLOW_MODES: tuple[OverflowMode, ...] = get_args(OverflowMode)
NAN_MODES: tuple[NanMode, ...] = get_args(NanMode)
# what each mode does, in a line (fmtsim list rounding|overflow|nan); the module docstring in full
ROUNDING_MODE_TEXT = {"rne": "round to nearest, ties to the even code (the default)",
                      "rna": "round to nearest, ties away from zero", "rtz": "toward zero", "rup": "toward +Inf",
                      "rdn": "toward -Inf", "rnz": "round to nearest, ties toward zero",
                      "rnm": "round to nearest, ties toward -Inf", "rnp": "round to nearest, ties toward +Inf",
                      "rto": "to odd (the neighbour with an odd code)",
                      "sr": "stochastic: your random bits (rbits=, --rbits) decide"}
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
OVERFLOW_NAN_MODES: tuple[OverflowNanMode, ...] = get_args(OverflowNanMode)
OVERFLOW_CHECKS: tuple[OverflowCheck, ...] = get_args(OverflowCheck)
INF_MODES: tuple[InfMode, ...] = get_args(InfMode)
E8M0_MODES: dict[str, tuple[str, ...]] = {
    "e8m0_negative": get_args(E8M0Negative),
    "e8m0_zero": get_args(E8M0Zero),
    "e8m0_inf": get_args(E8M0Inf),
    "e8m0_tiny": get_args(E8M0Tiny),
}
E8M0_ENCODINGS: tuple[E8M0Encoding, ...] = get_args(E8M0Encoding)
# an exact -0.0 input: its code keeps the sign where the format has a -0 ('keep'), or is +0 ('positive',
# TransformerEngine's reference FP4 cast)
NEG_ZERO_INPUTS: tuple[NegZeroInput, ...] = get_args(NegZeroInput)
# a negative nonzero input that rounds to zero: -0 where the format has one ('keep', IEEE 754), or +0
# ('positive': qtorch, pychop's Chop_, CPFloat's directed modes)
NEG_UNDERFLOWS: tuple[NegUnderflow, ...] = get_args(NegUnderflow)
# subnormals flushed to a zero of the input's sign: none (default), every input below the smallest
# normal ('inputs': pychop's subnormal=False), or every subnormal result ('results': FTZ hardware)
SUBNORMAL_FLUSHES: tuple[SubnormalFlush, ...] = get_args(SubnormalFlush)
# NaN modes once named after the implementation that does them: what each is called now
RENAMED_NAN_MODES = {"ml_dtypes": "zero_sign_flipped", "torchao": "payload_rounded",
                     "te": "zero, with neg_zero_input='positive'"}
INTERMEDIATES: tuple[IntermediateType, ...] = get_args(IntermediateType)
INTERMEDIATE_CARRIES: tuple[IntermediateCarry, ...] = get_args(IntermediateCarry)
TININESS: tuple[Tininess, ...] = get_args(Tininess)
FLAG_FIELDS: dict[str, tuple[str, ...]] = {
    "flag_overflow": get_args(FlagOverflow),
    "flag_nan": get_args(FlagNan),
    "flag_inf_nan": get_args(FlagInfNan),
    "flag_inf_number": get_args(FlagInfNumber),
    "flag_neg_zero": get_args(FlagNegZero),
}
NAN_CODE_SIGNS: tuple[NanCodeSign, ...] = get_args(NanCodeSign)
SR_RULES: tuple[SrRule, ...] = get_args(SrRule)
SR_MAX_BITS = 32
SOURCES = SOURCE_NAMES
# NaN modes that need the format to have a NaN code / that give a NaN code
_NAN_CODE_MODES = ("signed", "canonical", "all_ones", "signed_all_ones", "positive")


@dataclass(frozen=True)
class Policy:
    """Caller-level choices; None means "the format's or the profile's default".

    One flat record, as profiles and callers write it; :func:`resolve` checks it against a
    format and groups it into a :class:`Resolved`. See the module docstring for every
    field's meaning and values."""

    rounding: RoundingMode | None = None
    overflow: OverflowMode | None = None
    nan: NanMode | None = None
    nan_negative: NanMode | None = None
    nan_code: int | None = None
    nan_sources: tuple[tuple[SourceName, NanMode], ...] = ()
    nan_unsigned_sources: tuple[SourceName, ...] = ()
    overflow_nan: OverflowNanMode | None = None
    overflow_check: OverflowCheck | None = None
    inf: InfMode | None = None
    e8m0_negative: E8M0Negative | None = None
    e8m0_zero: E8M0Zero | None = None
    e8m0_inf: E8M0Inf | None = None
    e8m0_tiny: E8M0Tiny | None = None
    intermediate: IntermediateType | None = None
    tininess: Tininess | None = None
    nan_code_sign: NanCodeSign | None = None
    nan_signaling_sources: tuple[tuple[SourceName, NanMode], ...] = ()
    flag_overflow: FlagOverflow | None = None
    flag_nan: FlagNan | None = None
    flag_inf_nan: FlagInfNan | None = None
    flag_inf_number: FlagInfNumber | None = None
    flag_neg_zero: FlagNegZero | None = None
    intermediate_carry: IntermediateCarry | None = None
    e8m0_encoding: E8M0Encoding | None = None
    neg_zero_input: NegZeroInput | None = None
    neg_underflow: NegUnderflow | None = None
    subnormal_flush: SubnormalFlush | None = None
    unsigned_negative: UnsignedNegative | None = None
    sr_rule: SrRule | None = None
    sr_bits: int | None = None


def _check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a name ({', '.join(allowed)}), not {type(value).__name__}")
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; choose one of: {', '.join(allowed)}")


# --- the sub-rules of a resolved policy: each holds decided values and checks them against a format ---


@dataclass(frozen=True)
class OverflowRule:
    """Finite values beyond max finite: the mode, when the test is made, and how a NaN that
    overflow (or an Inf input) produces is written (None: like NaN inputs under 'canonical' and
    'all_ones', else the quiet NaN with the input's sign)."""

    mode: OverflowMode = "satfinite"
    when: OverflowCheck = "after"
    nan: OverflowNanMode | None = None
    unsigned_negative: UnsignedNegative = "zero"

    @property
    def saturating(self) -> bool:
        return self.mode != "nonsat"

    def check(self, fmt: Format) -> None:
        _check_choice("overflow mode", self.mode, OVERFLOW_MODES)
        _check_choice("overflow_check", self.when, OVERFLOW_CHECKS)
        if self.nan is not None:
            _check_choice("overflow_nan mode", self.nan, OVERFLOW_NAN_MODES)
        _check_choice("unsigned_negative", self.unsigned_negative, get_args(UnsignedNegative))
        if self.unsigned_negative == "nan" and (fmt.signed or not fmt.has_nan):
            raise ValueError(f"{fmt.name}: unsigned_negative='nan' applies to unsigned formats with a NaN")
        if self.mode == "satsym" and not (fmt.kind == "int" and fmt.signed):
            raise ValueError(f"{fmt.name}: overflow='satsym' applies to signed integer formats only")


def _check_nan_mode(f: Format, n: Any, field: str, nan_code: int | None) -> None:
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


def _check_pairs(f: Format, items: Any, what: str, nan_code: int | None) -> None:
    """((source, NaN mode), ...) of a per-source NaN rule, each checked."""
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"{what} must be ((source, nan mode), ...) pairs")
        _check_choice(f"{what} source", item[0], SOURCES)
        _check_nan_mode(f, item[1], what, nan_code)


@dataclass(frozen=True)
class NanRule:
    """NaN inputs: the mode for positive NaNs (``mode``) and negative ones (``negative``), the
    code of 'fixed' and its sign, and the per-source rules. ``for_source`` applies those to one
    source type, setting ``signaling`` (the mode for its signalling NaNs, if any) and
    ``sign_dropped`` (its NaNs lose their sign before the conversion)."""

    mode: NanMode
    negative: NanMode
    code: int | None = None
    code_sign: NanCodeSign = "as_given"
    sources: tuple[tuple[SourceName, NanMode], ...] = ()
    signaling_sources: tuple[tuple[SourceName, NanMode], ...] = ()
    unsigned_sources: tuple[SourceName, ...] = ()
    signaling: NanMode | None = None
    sign_dropped: bool = False

    @property
    def modes(self) -> frozenset[str]:
        """Every mode a NaN input of some sign (or a signalling one) is converted under."""
        return frozenset((self.mode, self.negative) + ((self.signaling,) if self.signaling else ()))

    def check(self, fmt: Format) -> None:
        _check_nan_mode(fmt, self.mode, "nan", self.code)
        if self.negative != self.mode:
            _check_nan_mode(fmt, self.negative, "nan_negative", self.code)
        _check_pairs(fmt, self.sources, "nan_sources", self.code)
        _check_pairs(fmt, self.signaling_sources, "nan_signaling_sources", self.code)
        for src in self.unsigned_sources:
            _check_choice("nan_unsigned_sources source", src, SOURCES)
        _check_choice("nan_code_sign", self.code_sign, NAN_CODE_SIGNS)
        if self.code_sign in ("input", "negative") and not fmt.signed:
            raise ValueError(f"{fmt.name} has no sign bit; nan_code_sign={self.code_sign!r} is impossible")

    def for_source(self, src: str) -> NanRule:
        """This rule for inputs of type ``src``: its per-source modes applied, the tables emptied."""
        signaling = next((m for s, m in self.signaling_sources if s == src), None)
        mode, negative = next(((m, m) for s, m in self.sources if s == src), (self.mode, self.negative))
        return replace(self, mode=mode, negative=negative, sources=(), signaling_sources=(), unsigned_sources=(),
                       signaling=signaling if self.signaling_sources else self.signaling,
                       sign_dropped=src in self.unsigned_sources if self.unsigned_sources else self.sign_dropped)

    def as_signaling(self) -> NanRule:
        """The rule a signalling NaN is converted under: its own mode, either sign."""
        assert self.signaling is not None
        return replace(self, mode=self.signaling, negative=self.signaling, signaling=None)

    def fixed_code(self, fmt: Format, negative: bool) -> int:
        """The code nan='fixed' writes for a NaN of this sign (``code`` and ``code_sign``)."""
        assert self.code is not None
        sign = fmt.sign_mask if fmt.signed else 0
        how = self.code_sign
        if how == "as_given":
            return self.code
        if how == "negative" or (how == "input" and negative):
            return (self.code & ~sign) | sign
        return self.code & ~sign


@dataclass(frozen=True)
class InputRule:
    """What +-Inf inputs (``inf``) and an exact -0.0 input (``neg_zero``) become."""

    inf: InfMode = "overflow"
    neg_zero: NegZeroInput = "keep"

    def check(self, fmt: Format) -> None:
        _check_choice("inf mode", self.inf, INF_MODES)
        if self.inf == "nan" and not fmt.has_nan:
            raise ValueError(f"{fmt.name} has no NaN encoding; inf='nan' is impossible")
        if self.inf == "zero" and not fmt.has_zero:
            raise ValueError(f"{fmt.name} has no zero; inf='zero' is impossible")
        _check_choice("neg_zero_input", self.neg_zero, NEG_ZERO_INPUTS)


@dataclass(frozen=True)
class UnderflowRule:
    """Results below the smallest normal: whether subnormals are flushed (``flush``) and the sign of
    the zero a negative input rounds or is flushed to (``negative_zero``)."""

    flush: SubnormalFlush = "none"
    negative_zero: NegUnderflow = "keep"

    def check(self, fmt: Format) -> None:
        _check_choice("subnormal_flush", self.flush, SUBNORMAL_FLUSHES)
        _check_choice("neg_underflow", self.negative_zero, NEG_UNDERFLOWS)
        if self.flush != "none" and not (fmt.kind == "float" and fmt.subnormals and fmt.man_bits > 0):
            raise ValueError(f"{fmt.name} has no subnormals: subnormal_flush={self.flush!r} does not apply")


@dataclass(frozen=True)
class E8M0Rule:
    """E8M0's inputs without a code (negatives, zeros, +Inf, below 2^-127) and its encoding."""

    negative: E8M0Negative = "nan"
    zero: E8M0Zero = "nan"
    inf: E8M0Inf = "nan"
    tiny: E8M0Tiny = "min"
    encoding: E8M0Encoding = "unsigned"

    def check(self, fmt: Format, rounding: str) -> None:
        for name, value in (("e8m0_negative", self.negative), ("e8m0_zero", self.zero), ("e8m0_inf", self.inf),
                            ("e8m0_tiny", self.tiny)):
            _check_choice(name, value, E8M0_MODES[name])
        _check_choice("e8m0_encoding", self.encoding, E8M0_ENCODINGS)
        if self.encoding != "unsigned" and rounding == "sr" and fmt.name == "e8m0":
            raise ValueError("e8m0_encoding='signed_exponent' is modelled for rne, rna, rtz, rup and rdn, not sr")


@dataclass(frozen=True)
class IntermediateRule:
    """The IEEE type a conversion rounds through first (None: none) and how that rounding
    treats a carry out of the significand."""

    type: IntermediateType | None = None
    carry: IntermediateCarry = "exact"

    def check(self) -> None:
        if self.type is not None:
            _check_choice("intermediate type", self.type, INTERMEDIATES)
        _check_choice("intermediate_carry", self.carry, INTERMEDIATE_CARRIES)
        if self.carry != "exact" and self.type is None:
            raise ValueError(f"intermediate_carry={self.carry!r} describes the rounding into an intermediate "
                             "type; give intermediate= too")


@dataclass(frozen=True)
class FlagRule:
    """The flag conventions of ``encode_with_flags`` (codes are unaffected)."""

    overflow: FlagOverflow = "rounded"
    nan: FlagNan = "to_number"
    inf_nan: FlagInfNan = "invalid"
    inf_number: FlagInfNumber = "inexact"
    neg_zero: FlagNegZero = "none"
    tininess: Tininess = "before"

    def check(self) -> None:
        for name, value in (("flag_overflow", self.overflow), ("flag_nan", self.nan),
                            ("flag_inf_nan", self.inf_nan), ("flag_inf_number", self.inf_number),
                            ("flag_neg_zero", self.neg_zero)):
            _check_choice(name, value, FLAG_FIELDS[name])
        _check_choice("tininess", self.tininess, TININESS)


@dataclass(frozen=True)
class StochasticRule:
    """How ``rounding='sr'`` turns random bits into a direction (the module docstring's table):
    the rule and N, the number of random bits (None: the bits the rounding discards, up to 32)."""

    rule: SrRule = "truncated"
    bits: int | None = None

    def check(self, rounding: str) -> None:
        _check_choice("sr_rule", self.rule, SR_RULES)
        if self.bits is not None:
            if isinstance(self.bits, bool) or not isinstance(self.bits, int):
                raise TypeError(f"sr_bits must be an int, not {type(self.bits).__name__}")
            if not 1 <= self.bits <= SR_MAX_BITS:
                raise ValueError(f"sr_bits must be 1..{SR_MAX_BITS}, not {self.bits}")
        if rounding != "sr" and (self.rule != "truncated" or self.bits is not None):
            raise ValueError(f"sr_rule and sr_bits describe rounding='sr' (rounding is {rounding!r})")


@dataclass(frozen=True)
class Resolved:
    """A policy made concrete for one format: every choice decided, grouped by what it governs.

    Built by :func:`resolve`, which checks each sub-rule against the format."""

    fmt: Format
    rounding: RoundingMode
    on_overflow: OverflowRule
    on_nan: NanRule
    on_input: InputRule = InputRule()
    e8m0: E8M0Rule = E8M0Rule()
    via: IntermediateRule = IntermediateRule()
    flags: FlagRule = FlagRule()
    stochastic: StochasticRule = StochasticRule()
    on_underflow: UnderflowRule = UnderflowRule()

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.fmt.name, self.rounding, self.on_overflow.mode, self.on_nan.mode)

    def for_source(self, src: str) -> Resolved:
        """This policy for inputs of type ``src``: a per-source NaN mode applied."""
        return _for_source(self, src)

    def fixed_nan_code(self, negative: bool) -> int:
        """The code nan='fixed' writes for a NaN of this sign."""
        return self.on_nan.fixed_code(self.fmt, negative)

    def without_intermediate(self) -> Resolved:
        return replace(self, via=IntermediateRule()) if self.via.type else self


Profile = Callable[[Format], Policy]


@lru_cache(maxsize=4096)
def _for_source(pol: Resolved, src: str) -> Resolved:
    rule = pol.on_nan.for_source(src)
    return pol if rule == pol.on_nan else replace(pol, on_nan=rule)


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


def _nan_rule(f: Format, base: Policy, nan: str | None) -> NanRule:
    """The NaN-input rules. An explicit ``nan=`` replaces the whole NaN-input choice of the profile
    (its per-sign and per-source modes too)."""
    mode: Any = nan if nan is not None else base.nan or ("signed" if f.has_nan else "raise")
    explicit = nan is not None
    negative = base.nan_negative if not explicit and base.nan_negative is not None else mode
    return NanRule(mode, negative, code=base.nan_code, code_sign=base.nan_code_sign or "as_given",
                   sources=() if explicit else tuple(base.nan_sources),
                   signaling_sources=() if explicit else tuple(base.nan_signaling_sources),
                   unsigned_sources=tuple(base.nan_unsigned_sources))


def resolve(
    fmt: str | Format,
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    profile: str | Policy | Profile | None = None,
) -> Resolved:
    """Concrete policy for ``fmt``: explicit arguments win over the profile's.

    ``profile``: a name in :data:`PROFILES`, a :class:`Policy` or a function
    Format -> Policy. The keywords are strings; each sub-rule checks its own against the format."""
    f = get_format(fmt)  # by the record, not its name: a user format defined anew is another one
    if isinstance(profile, str):  # and a named profile by its function (tests swap PROFILES entries)
        from .profiles import PROFILES

        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
        profile = PROFILES[profile]
    try:
        return _resolve_cached(f, rounding, overflow, nan, profile)
    except TypeError as e:  # an unhashable argument: resolved afresh (and checked: it is probably wrong)
        if "unhashable" not in str(e):
            raise
        return _resolve(f, rounding, overflow, nan, profile)


@lru_cache(maxsize=4096)
def _resolve_cached(f: Format, rounding: str | None, overflow: str | None, nan: str | None,
                    profile: str | Policy | Profile | None) -> Resolved:
    # the oracle resolves once per value: the same arguments give the same (immutable) policy; a
    # profile function is taken to be what it is documented to be, a function of the format
    return _resolve(f, rounding, overflow, nan, profile)


def _resolve(f: Format, rounding: str | None, overflow: str | None, nan: str | None,
             profile: str | Policy | Profile | None) -> Resolved:
    base = Policy("rne", "satfinite", None)
    if profile is not None:
        base = _profile_policy(profile, f)
    r: Any = rounding if rounding is not None else base.rounding or "rne"
    _check_choice("rounding mode", r, ROUNDING_MODES)
    o: Any = overflow if overflow is not None else base.overflow or "satfinite"
    _check_choice("overflow mode", o, OVERFLOW_MODES)
    on_overflow = OverflowRule(o, base.overflow_check or "after", base.overflow_nan, base.unsigned_negative or "zero")
    sat = on_overflow.saturating
    on_nan = _nan_rule(f, base, nan)
    on_input = InputRule(base.inf or "overflow", base.neg_zero_input or "keep")
    on_underflow = UnderflowRule(base.subnormal_flush or "none", base.neg_underflow or "keep")
    e8m0 = E8M0Rule(base.e8m0_negative or ("min" if sat else "nan"), base.e8m0_zero or ("min" if sat else "nan"),
                    base.e8m0_inf or ("max" if sat else "nan"), base.e8m0_tiny or "min",
                    base.e8m0_encoding or "unsigned")
    via = IntermediateRule(base.intermediate, base.intermediate_carry or "exact")
    flags = FlagRule(base.flag_overflow or "rounded", base.flag_nan or "to_number", base.flag_inf_nan or "invalid",
                     base.flag_inf_number or "inexact", base.flag_neg_zero or "none", base.tininess or "before")
    on_overflow.check(f)
    on_nan.check(f)
    on_input.check(f)
    on_underflow.check(f)
    e8m0.check(f, r)
    stochastic = StochasticRule(base.sr_rule or "truncated", base.sr_bits)
    via.check()
    flags.check()
    stochastic.check(r)
    if r in ("rnz", "rnm", "rnp", "rto") and f.name == "e8m0" and e8m0.encoding != "unsigned":
        raise ValueError(f"e8m0_encoding={e8m0.encoding!r} is modelled for rne, rna, rtz, rup and rdn, not {r}")
    return Resolved(f, r, on_overflow, on_nan, on_input, e8m0, via, flags, stochastic, on_underflow)


#: every field name of a Policy, in order (for tools that print or build policies)
POLICY_FIELDS = tuple(fl.name for fl in fields(Policy))
