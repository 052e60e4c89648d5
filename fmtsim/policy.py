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
    ml_dtypes  what ml_dtypes 0.6 casts do: 'signed' for formats with NaN; for FP4/FP6
               the zero whose sign is the opposite of the NaN's (-0 for +NaN, +0 for -NaN).
    torchao    FP4/FP6 only, what torchao's bit casts (f32_to_f4_unpacked and the FP6
               pair) do: the NaN is rounded as if its exponent were that of 1.0, i.e. as
               +-1.m, m its float32 significand field, the sign kept (the quiet NaN
               0x7FC00000 gives 1.5, FP4 code 0x3). Inputs of other types are read as
               numpy converts them to float32.
    te         FP4/FP6 only, what TransformerEngine's reference FP4 cast does: NaN -> +0,
               and a -0.0 input -> +0 too (negative values that round to zero keep their
               sign).

Under ``canonical`` and ``all_ones`` a NaN produced by nonsat overflow or an Inf
input is written the same way; under the others it is the quiet NaN with the
input's sign.

E8M0 has no sign, zero or infinity: NaN, +-Inf, +-0 and negative inputs all
encode to its NaN 0xFF under every policy (OCP MX 5.4.1; ml_dtypes agrees).
Positive values below 2^-127 encode to 0x00 (the smallest scale) whatever the
mode: there is nothing below it. Unsigned UE4M3 and unsigned integers clamp
negative inputs to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .formats import Format, get_format

__all__ = [
    "ROUNDING_MODES",
    "OVERFLOW_MODES",
    "NAN_MODES",
    "PROFILES",
    "Policy",
    "Resolved",
    "resolve",
]

ROUNDING_MODES = ("rne", "rna", "rtz", "rup", "rdn", "sr")
OVERFLOW_MODES = ("satfinite", "nonsat", "satsym")
NAN_MODES = ("signed", "canonical", "all_ones", "signed_all_ones", "raise", "max", "zero", "ml_dtypes",
             "torchao", "te")


@dataclass(frozen=True)
class Policy:
    """Caller-level choices; None means "the format's or the profile's default"."""

    rounding: str | None = None
    overflow: str | None = None
    nan: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A policy made concrete for one format: every field is decided."""

    fmt: Format
    rounding: str
    overflow: str
    nan: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.fmt.name, self.rounding, self.overflow, self.nan)


def _profile_ocp(fmt: Format) -> Policy:
    return Policy("rne", "satfinite", "canonical" if fmt.has_nan else "raise")


def _profile_ptx(fmt: Format) -> Policy:
    # PTX cvt: .satfinite is mandatory for FP8/FP6/FP4; NaN -> canonical 0x7F for
    # FP8, +MAX_NORM for FP4/FP6; float->int cvt turns NaN into 0; E8M0 takes .rz or
    # .rp only, and .rp (cvt.rp.satfinite.ue8m0x2) is the one MX scale recipes use.
    if fmt.kind == "int":
        return Policy("rne", "satfinite", "zero")
    if fmt.name == "e8m0":  # cvt to ue8m0x2 takes only .rz or .rp; MX scale recipes use .rp
        return Policy("rup", "satfinite", "canonical")
    return Policy("rne", "satfinite", "canonical" if fmt.has_nan else "max")


def _profile_ml_dtypes(fmt: Format) -> Policy:
    # ml_dtypes 0.6 numpy casts: RNE (E8M0 ties up), never saturating.
    rounding = "rna" if fmt.name == "e8m0" else "rne"
    return Policy(rounding, "nonsat", "signed" if fmt.has_nan else "ml_dtypes")


def _profile_onnx(fmt: Format, saturate: bool) -> Policy:
    # ONNX Cast (opset 24/25 reference, onnx 1.23). saturate=1: FP8 clips to +-max, then
    # casts with ml_dtypes (RNE, NaN keeps its sign); saturate=0: a plain ml_dtypes cast
    # (FP8 overflow -> Inf / NaN). FP4 always casts with ml_dtypes (saturating). E8M0 uses
    # round_mode "up" by default. Integers round half to even and clip (their NaN case is
    # not checked against onnx: fmtsim writes 0).
    if fmt.kind == "int":
        return Policy("rne", "satfinite", "zero")
    overflow = "satfinite" if saturate else "nonsat"
    if fmt.name == "e8m0":
        return Policy("rup", overflow, "signed")
    return Policy("rne", overflow, "signed" if fmt.has_nan else "ml_dtypes")


def _profile_gfloat(fmt: Format) -> Policy:
    # gfloat round_float + encode_float defaults: TiesToEven (E8M0: the even code),
    # sat=False, every NaN written as the all-ones code; FP4/FP6 NaN raises there too.
    return Policy("rne", "nonsat", "all_ones" if fmt.has_nan else "raise")


def _profile_microxcaling(fmt: Format) -> Policy:
    # microxcaling's default element rounding "nearest" is ties away; MX elements
    # saturate. (Its subnormal flush is a block-level option: mx.quantize(...,
    # flush_subnormals=True).) It fake-quantizes to float values (mx/elemwise_ops.py
    # _quantize_elemwise_core, read, not run: it is not on PyPI): a NaN input stays a NaN
    # value, and an Inf input is written back as Inf after the saturating clamp. FP4/FP6
    # have no code for either, so NaN keeps fmtsim's default (raise; signed NaN where the
    # format has one); only E5M2 could hold its Inf, which this profile saturates.
    return Policy("rna", "satfinite", None)


def _profile_torch(fmt: Format) -> Policy:
    # PyTorch 2.13 Tensor.to casts (checked against torch 2.13.0, CPU): E4M3 saturates
    # (Inf too), E5M2 and FNUZ do not; E5M2 NaN is 0x7F/0xFF. E8M0 rounds ties up like
    # ml_dtypes. PyTorch has no cast into FP4/FP6/UE4M3/integers: OCP defaults there.
    # float64 tensors round through float32 (a named divergence, not a policy). Older
    # releases differ: torchao's to_mx notes that PyTorch 2.11 and older eager casts did
    # not saturate finite E4M3 overflow (pytorch PR 178817 changed it); not run here.
    if fmt.name == "e4m3":
        return Policy("rne", "satfinite", "signed")
    if fmt.name == "e5m2":
        return Policy("rne", "nonsat", "signed_all_ones")
    if fmt.name in ("e4m3fnuz", "e5m2fnuz"):
        return Policy("rne", "nonsat", "signed")
    if fmt.name == "e8m0":
        return Policy("rna", "nonsat", "signed")
    return _profile_ocp(fmt)


def _profile_torchao(fmt: Format) -> Policy:
    # torchao 0.18: FP8/E8M0 through PyTorch's casts; FP4/FP6 through its own bit casts
    # (RNE, saturating, NaN payload rounded as 1.m).
    if fmt.name in ("e2m1", "e3m2", "e2m3"):
        return Policy("rne", "satfinite", "torchao")
    return _profile_torch(fmt)


def _profile_te(fmt: Format) -> Policy:
    # TransformerEngine's Python reference recipes (transformer_engine/pytorch/
    # custom_recipes): FP4 by the NVFP4 reference's interval cast (RNE, saturating, NaN and
    # -0.0 -> code 0); FP8 by a plain PyTorch cast, (x * scale).to(float8), as in its
    # current-scaling reference, so the torch profile; E8M0 scales rounded up, as its
    # power-of-two scales (ceil of log2) and MXFP8 recipe do. TE's CUDA kernels convert
    # with cvt.rn.satfinite instead: use the ptx profile for them.
    if fmt.name == "e2m1":
        return Policy("rne", "satfinite", "te")
    if fmt.name in ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"):
        return _profile_torch(fmt)
    return _profile_ptx(fmt)


PROFILES = {
    "ocp": _profile_ocp,
    "ptx": _profile_ptx,
    "ml_dtypes": _profile_ml_dtypes,
    "onnx_sat": lambda fmt: _profile_onnx(fmt, True),
    "onnx_nosat": lambda fmt: _profile_onnx(fmt, False),
    "gfloat": _profile_gfloat,
    "microxcaling": _profile_microxcaling,
    "torch": _profile_torch,
    "torchao": _profile_torchao,
    "te": _profile_te,
}


def _check_choice(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a name ({', '.join(allowed)}), not {type(value).__name__}")
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; choose one of: {', '.join(allowed)}")


def resolve(
    fmt: str | Format,
    rounding: str | None = None,
    overflow: str | None = None,
    nan: str | None = None,
    profile: str | None = None,
) -> Resolved:
    """Concrete policy for ``fmt``: explicit arguments win over the profile's."""
    f = get_format(fmt)
    base = Policy("rne", "satfinite", None)
    if profile is not None:
        if not isinstance(profile, str):
            raise TypeError(f"profile must be a name ({', '.join(PROFILES)}), not {type(profile).__name__}")
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
        base = PROFILES[profile](f)
    r = rounding if rounding is not None else base.rounding or "rne"
    o = overflow if overflow is not None else base.overflow or "satfinite"
    n = nan if nan is not None else base.nan or ("signed" if f.has_nan else "raise")
    _check_choice("rounding mode", r, ROUNDING_MODES)
    _check_choice("overflow mode", o, OVERFLOW_MODES)
    _check_choice("nan mode", n, NAN_MODES)
    if o == "satsym" and not (f.kind == "int" and f.signed):
        raise ValueError(f"{f.name}: overflow='satsym' applies to signed integer formats only")
    if n in ("signed", "canonical", "all_ones", "signed_all_ones") and not f.has_nan:
        raise ValueError(
            f"{f.name} has no NaN encoding; nan={n!r} is impossible "
            "(use 'raise', 'max', 'zero', 'ml_dtypes', 'torchao' or 'te')"
        )
    if n in ("torchao", "te") and (f.has_nan or f.kind != "float"):
        raise ValueError(f"{f.name}: nan={n!r} reproduces an FP4/FP6 cast and applies to e2m1, e3m2 and e2m3 only")
    if f.name == "e8m0" and n not in ("signed", "canonical", "all_ones", "signed_all_ones"):
        raise ValueError(f"e8m0: NaN always encodes to 0xFF; nan={n!r} cannot apply")
    return Resolved(f, r, o, n)
