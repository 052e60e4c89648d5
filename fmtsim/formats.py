"""What a format IS: one small declarative record per format.

Every number a user might ask about (max finite, min normal, NaN codes, the
value of each code, ...) is derived from the few fields of the record, never
typed in. Adding a format is adding one record to ``_RECORDS``.

Value of a float code with sign s, exponent field e and mantissa field m
(OCP MX v1.0 and OFP8 rev 1.0):

    normal     (-1)^s * 2^(e - bias) * (1 + m / 2^man_bits)
    subnormal  (-1)^s * 2^(1 - bias) * (m / 2^man_bits)        (e == 0)

``specials`` says which codes are not numbers:

    "ieee"  exponent all ones: mantissa 0 is +-Inf, anything else NaN (E5M2, and
            the IEEE-style E4M3 and E3M4 of ml_dtypes / LLVM APFloat)
    "fn"    only exponent and mantissa all ones is NaN, no Inf (E4M3, UE4M3, E8M0)
    "fnuz"  the negative-zero code 0x80 is the only NaN; no -0, no Inf (AMD FNUZ,
            and E4M3B11FNUZ, bias 11)
    "top_inf"  one NaN and an Inf at the top of each sign (IEEE P3109 Extended): signed, the
            negative-zero code 0x80 is the NaN and 0x7F / 0xFF are +Inf / -Inf; unsigned, the
            all-ones code is the NaN and the one below it +Inf. No -0.
    "none"  every code is a finite number (FP4, FP6, integers)

IEEE P3109 (interim report v4.0, 26 June 2026, 3.1-3.2 and 4.7.6) defines a family
Binary{K}p{P}{s|u}{e|f}: K bits, precision P (signed 0 < P < K, unsigned 0 < P <= K), bias
2^(K-P-1) signed and 2^(K-P) unsigned, subnormals, no -0, one NaN; Extended formats (e) have
+-Inf, Finite ones (f) none. :func:`p3109` builds one (``get_format("binary8p4se")`` too); K is
3..16 here (the widths the working group publishes tables for). Codes are uint8 up to 8 bits and
uint16 beyond (:attr:`Format.code_dtype`); some wide formats' values go beyond float64
(Binary16p1se: 2^16382), which :attr:`Format.parts` holds as integers. Signed Finite formats are
FNUZ-shaped ("fnuz"), unsigned Finite ones have only the all-ones NaN ("fn").

Integer formats are two's complement (signed) or plain binary, and a code
is worth ``code * 2**scale_exp`` (MX INT8: scale_exp = -6).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from types import MappingProxyType
from typing import Literal

import ml_dtypes
import numpy as np

__all__ = ["Format", "FORMATS", "get_format", "format_names", "p3109", "P3109_WIDTHS", "define_format",
           "parse_format", "user_formats", "forget_format"]

Kind = Literal["float", "int"]
Specials = Literal["ieee", "fn", "fnuz", "top_inf", "none"]

#: code classes in :attr:`Format.parts` (the names :meth:`Format.code_class` gives)
CLASS_NAN, CLASS_INF, CLASS_ZERO, CLASS_SUBNORMAL, CLASS_NORMAL, CLASS_INT = range(6)
CLASS_NAMES = ("nan", "inf", "zero", "subnormal", "normal", "int")


@dataclass(frozen=True, eq=False)
class CodeParts:
    """Every code of a format as integers: class (CLASS_*), sign, and for finite codes the exact
    value (-1)^negative * sig * 2^exp2 (integers: sig * 2^scale_exp). Wide formats' values need
    no float to hold them."""

    cls: np.ndarray  # int8
    negative: np.ndarray  # bool: the sign bit (floats) or a negative value (integers)
    sig: np.ndarray  # int64, >= 0
    exp2: np.ndarray  # int64

    @property
    def finite(self) -> np.ndarray:
        return self.cls >= CLASS_ZERO


def _read_only_parts(cls: np.ndarray, negative: np.ndarray, sig: np.ndarray, exp2: np.ndarray) -> CodeParts:
    arrays = (cls, np.asarray(negative, bool), sig.astype(np.int64), exp2.astype(np.int64))
    for a in arrays:
        a.flags.writeable = False
    return CodeParts(*arrays)


def power_text(v: Fraction) -> str:
    """A value as a float where it is one, else as m*2^e (exactly)."""
    if v == 0:
        return "0"
    try:
        f = float(v)
        if not math.isinf(f) and Fraction(f) == v:
            return repr(f)
    except OverflowError:
        pass
    e = _floor_log2(abs(v))
    m = v / Fraction(2) ** e
    return f"{m}*2^{e}" if m != 1 else f"2^{e}"


@dataclass(frozen=True, eq=False)
class Format:
    """Declarative description of one number format (see module docstring)."""

    name: str
    kind: Kind
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    signed: bool = True
    specials: Specials = "none"
    subnormals: bool = True
    int_bits: int = 0
    scale_exp: int = 0
    aliases: tuple[str, ...] = ()
    ml_dtypes_name: str | None = None
    title: str = ""
    source: str = field(default="", repr=False)

    # ---- code space ---------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Width of a code in bits (UE4M3: 7; it is stored in a byte with bit 7 clear)."""
        if self.kind == "int":
            return self.int_bits
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def n_codes(self) -> int:
        return 1 << self.bits

    @property
    def sign_mask(self) -> int:
        """The sign bit of a code, 0 for unsigned formats."""
        return 1 << (self.bits - 1) if self.signed else 0

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    # ---- the meaning of every code --------------------------------------------------
    def code_class(self, code: int) -> str:
        """'nan', 'inf', 'zero', 'subnormal', 'normal' (floats) or 'int'."""
        self._check_code(code)
        if self.kind == "int":
            return "zero" if code == 0 else "int"
        man_mask = (1 << self.man_bits) - 1
        exp_mask = (1 << self.exp_bits) - 1
        e = (code >> self.man_bits) & exp_mask
        m = code & man_mask
        if self.specials == "fnuz" and code == self.sign_mask:
            return "nan"
        if self.specials == "ieee" and e == exp_mask:
            return "inf" if m == 0 else "nan"
        if self.specials == "fn" and e == exp_mask and m == man_mask:
            return "nan"
        if self.specials == "top_inf":
            top = self.n_codes - 1 - self.sign_mask  # the largest magnitude code of each sign
            if (self.signed and code == self.sign_mask) or (not self.signed and code == top):
                return "nan"
            if (code & ~self.sign_mask) == (top if self.signed else top - 1):
                return "inf"
        if e == 0 and self.subnormals:
            return "zero" if m == 0 else "subnormal"
        return "normal"

    def code_fields(self, code: int) -> tuple[int, int, int]:
        """(sign, biased exponent field, mantissa field) of a float code."""
        self._check_code(code)
        sign = 1 if code & self.sign_mask else 0
        e = (code >> self.man_bits) & ((1 << self.exp_bits) - 1)
        return sign, e, code & ((1 << self.man_bits) - 1)

    def code_value(self, code: int) -> Fraction | float:
        """Exact value of a code: a Fraction, or float nan / +-inf."""
        cls = self.code_class(code)
        if self.kind == "int":
            v = code - (1 << self.bits) if (self.signed and code & self.sign_mask) else code
            return Fraction(v) * Fraction(2) ** self.scale_exp
        sign = -1 if code & self.sign_mask else 1
        if cls == "nan":
            return math.nan
        if cls == "inf":
            return sign * math.inf
        _, e, m = self.code_fields(code)
        if cls in ("zero", "subnormal"):
            return sign * Fraction(m, 1 << self.man_bits) * Fraction(2) ** (1 - self.bias)
        return sign * (1 + Fraction(m, 1 << self.man_bits)) * Fraction(2) ** (e - self.bias)

    def _check_code(self, code: int) -> None:
        if not 0 <= code < self.n_codes:
            raise ValueError(f"{self.name}: code {code:#x} is outside 0..{self.n_codes - 1:#x}")

    # ---- derived tables -------------------------------------------------------------
    @property
    def code_dtype(self) -> np.dtype:
        """The unsigned integer type codes are held in: uint8 up to 8 bits, uint16 up to 16."""
        return np.dtype(np.uint8 if self.bits <= 8 else np.uint16)

    @cached_property
    def parts(self) -> CodeParts:
        """Every code's class and exact value as integers, computed array-wide (the twin of
        :meth:`code_class` and :meth:`code_value`, which a test holds equal code by code)."""
        codes = np.arange(self.n_codes, dtype=np.int64)
        if self.kind == "int":
            v = codes - np.where(self.signed & (codes >= (1 << max(self.bits - 1, 0))), 1 << self.bits, 0)
            cls = np.where(v == 0, CLASS_ZERO, CLASS_INT).astype(np.int8)
            return _read_only_parts(cls, v < 0, np.abs(v), np.full(self.n_codes, self.scale_exp, np.int64))
        man_mask, exp_mask = (1 << self.man_bits) - 1, (1 << self.exp_bits) - 1
        e, m = (codes >> self.man_bits) & exp_mask, codes & man_mask
        sub = (e == 0) & self.subnormals
        cls = np.where(sub, np.where(m == 0, CLASS_ZERO, CLASS_SUBNORMAL), CLASS_NORMAL).astype(np.int8)
        if self.specials == "fnuz":
            cls[self.sign_mask] = CLASS_NAN
        elif self.specials == "ieee":
            cls[(e == exp_mask) & (m == 0)] = CLASS_INF
            cls[(e == exp_mask) & (m != 0)] = CLASS_NAN
        elif self.specials == "fn":
            cls[(e == exp_mask) & (m == man_mask)] = CLASS_NAN
        elif self.specials == "top_inf":
            top = self.n_codes - 1 - self.sign_mask
            inf = top if self.signed else top - 1
            cls[(codes & ~self.sign_mask) == inf] = CLASS_INF
            cls[self.sign_mask if self.signed else top] = CLASS_NAN
        sig = np.where(sub, m, m + (1 << self.man_bits))
        exp2 = np.where(sub, 1, e) - self.bias - self.man_bits
        return _read_only_parts(cls, (codes & self.sign_mask) != 0, sig, exp2)

    @cached_property
    def fits_float64(self) -> bool:
        """Is every finite value a float64? (Not so for wide P3109 formats such as Binary16p1se,
        whose values reach 2^16382.)"""
        return bool(self._float64_exact.all())

    @cached_property
    def _float64_exact(self) -> np.ndarray:
        p = self.parts
        with np.errstate(over="ignore", under="ignore"):
            v = np.ldexp(p.sig.astype(np.float64), p.exp2)
            back = np.ldexp(v, -p.exp2)
        return ~p.finite | (np.isfinite(v) & (back == p.sig))

    @cached_property
    def values(self) -> np.ndarray:
        """float64 value of every code (exact; NaN codes are NaN with the code's sign). ValueError
        for a format with values beyond float64 (see :attr:`fits_float64`): read :attr:`parts`,
        or :meth:`code_value`, there."""
        if not self.fits_float64:
            raise ValueError(f"{self.name}: values from {power_text(self.min_positive)} to "
                             f"{power_text(self.max_finite)} are not all float64s; read Format.parts or "
                             "Format.code_value for exact values")
        p = self.parts
        with np.errstate(over="ignore", under="ignore"):
            mag = np.ldexp(p.sig.astype(np.float64), p.exp2)
        mag[p.cls == CLASS_NAN] = np.nan
        mag[p.cls == CLASS_INF] = np.inf
        out = np.where(p.negative, -mag, mag)  # floats: the sign bit, kept on -0 and on NaN
        out.flags.writeable = False
        return out

    @cached_property
    def nan_codes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in np.flatnonzero(self.parts.cls == CLASS_NAN))

    @cached_property
    def inf_codes(self) -> tuple[int, ...]:
        return tuple(int(c) for c in np.flatnonzero(self.parts.cls == CLASS_INF))

    @property
    def has_nan(self) -> bool:
        return bool(self.nan_codes)

    @property
    def has_inf(self) -> bool:
        return bool(self.inf_codes)

    @property
    def has_neg_zero(self) -> bool:
        return self.signed and self.kind == "float" and self.code_class(self.sign_mask) == "zero"

    @property
    def has_zero(self) -> bool:
        return bool((self.parts.cls == CLASS_ZERO).any())

    def _value_of(self, code: int) -> Fraction:
        value = self.code_value(code)
        assert isinstance(value, Fraction)
        return value

    @cached_property
    def max_finite(self) -> Fraction:
        return self._value_of(self._extreme_finite(True))

    @cached_property
    def min_finite(self) -> Fraction:
        """Most negative finite value (0 for unsigned integers, min value for E8M0)."""
        return self._value_of(self._extreme_finite(False))

    def _extreme_finite(self, largest: bool) -> int:
        """The code of the largest (or most negative) finite value: magnitudes grow with the code
        within each sign, in sign-magnitude floats and in integers' value order alike."""
        p = self.parts
        if self.kind == "float":  # exact order without float64 range: (sign, exponent field, mantissa)
            mag_order = np.where(p.finite, np.arange(self.n_codes) & ~self.sign_mask, -1)
            if largest:
                return int(np.argmax(np.where(p.finite & ~p.negative, mag_order, -1)))
            if self.signed and (p.finite & p.negative & (p.cls != CLASS_ZERO)).any():
                return int(np.argmax(np.where(p.finite & p.negative & (p.cls != CLASS_ZERO), mag_order, -1)))
            return int(np.argmin(np.where(p.finite, mag_order, self.n_codes)))
        v = np.where(p.negative, -p.sig, p.sig)
        return int(np.argmax(np.where(p.finite, v, np.iinfo(np.int64).min))) if largest else \
            int(np.argmin(np.where(p.finite, v, np.iinfo(np.int64).max)))

    @property
    def min_normal(self) -> Fraction | None:
        """Smallest positive normal value (None for integer formats)."""
        if self.kind == "int":
            return None
        e_min = 0 if not self.subnormals else 1
        return Fraction(2) ** (e_min - self.bias)

    @property
    def min_subnormal(self) -> Fraction | None:
        """Smallest positive subnormal (None when the format has none)."""
        if self.kind == "int" or not self.subnormals or self.man_bits == 0:
            return None
        return Fraction(2) ** (1 - self.bias - self.man_bits)

    @cached_property
    def min_positive(self) -> Fraction:
        p = self.parts
        positive = p.finite & ~p.negative & (p.sig > 0)
        if not positive.any():
            raise ValueError(f"{self.name} has no positive finite value")
        if self.kind == "float":  # the smallest magnitude code of the positive side
            return self._value_of(int(np.argmax(positive)))
        return Fraction(int(p.sig[positive].min())) * Fraction(2) ** self.scale_exp

    @property
    def emax(self) -> int:
        """Exponent of the largest normal: floor(log2(max finite)); MX calls it emax_elem."""
        return _floor_log2(self.max_finite)

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal (integer formats: of the smallest step)."""
        if self.kind == "int":
            return self.scale_exp
        return _floor_log2(self.min_normal)  # type: ignore[arg-type]

    @property
    def precision(self) -> int:
        """Significant bits of the largest value (floats: man_bits + 1)."""
        if self.kind == "float":
            return self.man_bits + 1
        m = max(abs(self.max_finite), abs(self.min_finite)) / Fraction(2) ** self.scale_exp
        return int(m).bit_length()

    @property
    def ml_dtype(self) -> np.dtype | None:
        """The ml_dtypes / numpy dtype of the same name, if the installed ml_dtypes has one."""
        if self.ml_dtypes_name is None:
            return None
        t = getattr(ml_dtypes, self.ml_dtypes_name, None) or getattr(np, self.ml_dtypes_name, None)
        return None if t is None else np.dtype(t)

    def __repr__(self) -> str:
        return f"Format({self.name!r})"


def _floor_log2(v: Fraction) -> int:
    """floor(log2(v)) for v > 0, exactly."""
    n, d = v.numerator, v.denominator
    e = n.bit_length() - d.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    return e


_RECORDS = [
    Format("e2m1", "float", 2, 1, 1, specials="none", aliases=("fp4", "fp4_e2m1", "float4_e2m1fn", "e2m1fn"),
           ml_dtypes_name="float4_e2m1fn", title="FP4 E2M1 (MXFP4/NVFP4 element)", source="OCP MX v1.0 5.3.3"),
    Format("e3m2", "float", 3, 2, 3, specials="none", aliases=("fp6_e3m2", "float6_e3m2fn", "e3m2fn"),
           ml_dtypes_name="float6_e3m2fn", title="FP6 E3M2 (MXFP6 element)", source="OCP MX v1.0 5.3.2"),
    Format("e2m3", "float", 2, 3, 1, specials="none", aliases=("fp6_e2m3", "float6_e2m3fn", "e2m3fn"),
           ml_dtypes_name="float6_e2m3fn", title="FP6 E2M3 (MXFP6 element)", source="OCP MX v1.0 5.3.2"),
    Format("e4m3", "float", 4, 3, 7, specials="fn", aliases=("e4m3fn", "fp8_e4m3", "fp8_e4m3fn", "float8_e4m3fn"),
           ml_dtypes_name="float8_e4m3fn", title="FP8 E4M3, OCP (FN)", source="OCP OFP8 rev 1.0"),
    Format("e4m3fnuz", "float", 4, 3, 8, specials="fnuz", aliases=("fp8_e4m3fnuz", "float8_e4m3fnuz"),
           ml_dtypes_name="float8_e4m3fnuz", title="FP8 E4M3, AMD FNUZ", source="LLVM APFloat Float8E4M3FNUZ"),
    Format("e5m2", "float", 5, 2, 15, specials="ieee", aliases=("fp8_e5m2", "float8_e5m2"),
           ml_dtypes_name="float8_e5m2", title="FP8 E5M2, OCP", source="OCP OFP8 rev 1.0"),
    Format("e5m2fnuz", "float", 5, 2, 16, specials="fnuz", aliases=("fp8_e5m2fnuz", "float8_e5m2fnuz"),
           ml_dtypes_name="float8_e5m2fnuz", title="FP8 E5M2, AMD FNUZ", source="LLVM APFloat Float8E5M2FNUZ"),
    Format("e4m3ieee", "float", 4, 3, 7, specials="ieee", aliases=("float8_e4m3", "fp8_e4m3ieee"),
           ml_dtypes_name="float8_e4m3", title="FP8 E4M3, IEEE-style (Inf and NaNs, max 240)",
           source="ml_dtypes 0.6 README float8_e4m3; LLVM APFloat Float8E4M3"),
    Format("e3m4", "float", 3, 4, 3, specials="ieee", aliases=("float8_e3m4", "fp8_e3m4"),
           ml_dtypes_name="float8_e3m4", title="FP8 E3M4, IEEE-style (Inf and NaNs)",
           source="ml_dtypes 0.6 README float8_e3m4; LLVM APFloat Float8E3M4"),
    Format("e4m3b11fnuz", "float", 4, 3, 11, specials="fnuz", aliases=("float8_e4m3b11fnuz", "fp8_e4m3b11fnuz"),
           ml_dtypes_name="float8_e4m3b11fnuz", title="FP8 E4M3, bias 11, FNUZ (TPU)",
           source="ml_dtypes 0.6 README float8_e4m3b11fnuz; LLVM APFloat Float8E4M3B11FNUZ"),
    Format("e8m0", "float", 8, 0, 127, signed=False, specials="fn", subnormals=False,
           aliases=("ue8m0", "e8m0fnu", "float8_e8m0fnu"), ml_dtypes_name="float8_e8m0fnu",
           title="E8M0 scale (MX shared scale)", source="OCP MX v1.0 5.4.1"),
    Format("ue4m3", "float", 4, 3, 7, signed=False, specials="fn", aliases=("fp8_ue4m3", "e4m3_unsigned"),
           title="UE4M3 scale (NVFP4 block scale; 7-bit code, byte bit 7 clear)",
           source="NVIDIA NVFP4 (cuBLAS VEC16_UE4M3)"),
    Format("mxint8", "int", int_bits=8, scale_exp=-6, aliases=("int8_mx", "mx_int8"),
           title="MX INT8 element (two's complement code * 2^-6)", source="OCP MX v1.0 5.3.4"),
    Format("int2", "int", int_bits=2, aliases=("s2",), ml_dtypes_name="int2", title="2-bit signed integer"),
    Format("uint2", "int", int_bits=2, signed=False, aliases=("u2",), ml_dtypes_name="uint2",
           title="2-bit unsigned integer"),
    Format("int4", "int", int_bits=4, aliases=("s4",), ml_dtypes_name="int4", title="4-bit signed integer"),
    Format("uint4", "int", int_bits=4, signed=False, aliases=("u4",), ml_dtypes_name="uint4",
           title="4-bit unsigned integer"),
    Format("int8", "int", int_bits=8, aliases=("s8",), ml_dtypes_name="int8", title="8-bit signed integer"),
    Format("uint8", "int", int_bits=8, signed=False, aliases=("u8",), ml_dtypes_name="uint8",
           title="8-bit unsigned integer"),
]

# read-only: a caller's FORMATS['x'] = ... would change every later call by that name (as mma.UNITS)
FORMATS: Mapping[str, Format] = MappingProxyType({f.name: f for f in _RECORDS})
_ALIASES: dict[str, str] = {}
for _f in _RECORDS:
    for _name in (_f.name, *_f.aliases):
        assert _name not in _ALIASES, _name
        _ALIASES[_name] = _f.name


#: the bit widths K of the P3109 formats fmtsim builds: those the working group publishes value
#: tables for (codes wider than a byte are uint16)
P3109_WIDTHS = range(3, 17)
_P3109_NAME = re.compile(r"binary(\d+)p(\d+)([su])([ef])")
_P3109_CACHE: dict[tuple[int, int, bool, bool], Format] = {}
P3109_SOURCE = "IEEE P3109 interim report v4.0 (26 June 2026), 3.1-3.2, 4.7.6"


def p3109(k: int, p: int, signed: bool = True, extended: bool = True) -> Format:
    """The IEEE P3109 format Binary{k}p{p}{s|u}{e|f} (module docstring); ValueError outside its ranges."""
    for what, v in (("K", k), ("P", p)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"P3109 {what} must be an int, not {type(v).__name__}")
    if k not in P3109_WIDTHS:
        if k > 2:
            raise ValueError(f"P3109 Binary{k}: fmtsim builds K = 3..16 (codes are at most uint16, the widths the "
                             "working group publishes value tables for); wider P3109 formats are not supported")
        raise ValueError(f"P3109 K must be greater than 2 (interim report 3.1), not {k}")
    top = k - 1 if signed else k
    if not 1 <= p <= top:
        raise ValueError(f"P3109 Binary{k}: P must be 1..{top} for {'signed' if signed else 'unsigned'} "
                         f"formats, not {p}")
    key = (k, p, bool(signed), bool(extended))
    if key not in _P3109_CACHE:
        name = f"binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}"
        specials: Specials = "top_inf" if extended else ("fnuz" if signed else "fn")
        _P3109_CACHE[key] = Format(
            name, "float", exp_bits=k - p if signed else k - p + 1, man_bits=p - 1,
            bias=2 ** (k - p - 1) if signed else 2 ** (k - p), signed=signed, specials=specials,
            title=f"IEEE P3109 Binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'} "
                  f"({'signed' if signed else 'unsigned'}, {'Extended' if extended else 'Finite'})",
            source=P3109_SOURCE)
    return _P3109_CACHE[key]


def p3109_formats(widths: range = P3109_WIDTHS) -> list[Format]:
    """Every P3109 format of the given widths: K, then P, signed before unsigned, Extended before Finite."""
    return [p3109(k, p, signed, extended) for k in widths for signed in (True, False)
            for p in range(1, k if signed else k + 1) for extended in (True, False)]


# ---- formats a user defines ---------------------------------------------------------

_USER: dict[str, Format] = {}
_SPEC = re.compile(r"(u?)e(\d+)m(\d+)(?:b(-?\d+))?(?:_(ieee|fn|fnuz|top_inf|none))?(_nosub)?")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_SPECIALS: tuple[Specials, ...] = ("ieee", "fn", "fnuz", "top_inf", "none")


def _user_record(name: str, exp_bits: int, man_bits: int, bias: int | None, signed: bool, specials: str,
                 subnormals: bool, title: str) -> Format:
    for what, v in (("exp_bits", exp_bits), ("man_bits", man_bits)) + ((("bias", bias),) if bias is not None else ()):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"format {name!r}: {what} must be an int, not {type(v).__name__}")
    for what, v in (("signed", signed), ("subnormals", subnormals)):
        if not isinstance(v, bool):
            raise TypeError(f"format {name!r}: {what} must be True or False, not {type(v).__name__}")
    if specials not in _SPECIALS:
        raise ValueError(f"format {name!r}: unknown specials {specials!r}; choose one of: {', '.join(_SPECIALS)}")
    if exp_bits < 1 or man_bits < 0:
        raise ValueError(f"format {name!r}: exp_bits must be >= 1 and man_bits >= 0 (integers have formats of "
                         f"their own), not {exp_bits} and {man_bits}")
    bits = int(signed) + exp_bits + man_bits
    if not 2 <= bits <= 16:
        raise ValueError(f"format {name!r}: {bits} bits; fmtsim's codes are uint8 or uint16, so a format has "
                         "2..16 bits")
    if specials == "ieee" and (man_bits < 1 or exp_bits < 2):
        raise ValueError(f"format {name!r}: specials='ieee' reserves the all-ones exponent for Inf and NaN; it "
                         "needs exp_bits >= 2 and man_bits >= 1")
    if specials == "fnuz" and not signed:
        raise ValueError(f"format {name!r}: specials='fnuz' puts the NaN on the negative-zero code; it needs a sign")
    if specials == "top_inf" and bits < 3:
        raise ValueError(f"format {name!r}: specials='top_inf' needs at least 3 bits (a NaN, an Inf and a number)")
    f = Format(name, "float", exp_bits, man_bits, (1 << (exp_bits - 1)) - 1 if bias is None else bias, signed=signed,
               specials=specials, subnormals=subnormals,
               title=title or f"user format: {_canonical_spec(exp_bits, man_bits, bias, signed, specials, subnormals)}",
               source="defined by the user")
    p = f.parts
    if not (p.finite & ~p.negative & (p.sig > 0)).any():
        raise ValueError(f"format {name!r} has no positive finite value")
    # the encode tables of byte formats read float32 patterns: every value, and every midpoint, must be a
    # float32 (wider formats are encoded from float64 by exact comparison, whatever their range)
    low, high = f.min_positive, f.max_finite
    if bits <= 8 and (low / 2 < Fraction(2) ** -149 or high * 2 >= Fraction(2) ** 128):
        raise ValueError(f"format {name!r}: values from {power_text(low)} to {power_text(high)}; "
                         "half the smallest and twice the largest must lie in float32's range (bias too far)")
    return f


def _canonical_spec(exp_bits: int, man_bits: int, bias: int | None, signed: bool, specials: str,
                    subnormals: bool) -> str:
    b = (1 << (exp_bits - 1)) - 1 if bias is None else bias
    return f"{'' if signed else 'u'}e{exp_bits}m{man_bits}b{b}_{specials}{'' if subnormals else '_nosub'}"


def define_format(name: str, exp_bits: int, man_bits: int, *, bias: int | None = None, signed: bool = True,
                  specials: str = "ieee", subnormals: bool = True, title: str = "") -> Format:
    """A float format from its parameters, checked and registered under ``name`` (lower-case letters,
    digits and '_'), so that every entry point that takes a format name takes it: encode, decode,
    encode_with_flags, quantize, the block quantizers, the oracle, tables, vectors.

    bias: default 2^(exp_bits-1) - 1 (IEEE's). specials: 'ieee' (Inf and NaNs on the all-ones exponent),
    'fn' (only the all-ones code of each sign is NaN), 'fnuz' (the negative-zero code is the only NaN),
    'top_inf' (one NaN, +-Inf at the top of each sign: P3109 Extended) or 'none'. subnormals=False
    makes exponent field 0 a normal binade, as E8M0's (the format then has no zero).
    Defining a name again with the same parameters returns the same format; with others, ValueError."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"format name must be lower-case letters, digits and '_', starting with a letter, "
                         f"not {name!r}")
    if name in _ALIASES or _P3109_NAME.fullmatch(name):
        raise ValueError(f"format name {name!r} is taken by a built-in format")
    f = _user_record(name, exp_bits, man_bits, bias, signed, specials, subnormals, title)
    old = _USER.get(name)
    if old is not None:
        if (old.exp_bits, old.man_bits, old.bias, old.signed, old.specials, old.subnormals) != \
                (f.exp_bits, f.man_bits, f.bias, f.signed, f.specials, f.subnormals):
            raise ValueError(f"format {name!r} is already defined otherwise ({old.title}); forget_format it first")
        return old
    _USER[name] = f
    return f


def parse_format(spec: str) -> Format:
    """A float format from one spec string, ``[u]e<E>m<M>[b<bias>][_<specials>][_nosub]`` (e.g.
    'e3m4b5_fn', 'ue5m3_none', 'e4m3b11_fnuz'; specials default 'ieee', bias IEEE's), named by the
    spec in full ('e3m4b5_fn'); the same spec gives the same format. get_format reads spec strings too."""
    m = _SPEC.fullmatch(spec.strip().lower().replace("-", "_")) if isinstance(spec, str) else None
    if m is None:
        raise ValueError(f"not a format spec: {spec!r}; write [u]e<E>m<M>[b<bias>][_<specials>][_nosub], "
                         "e.g. 'e3m4b5_fn' or 'ue5m3_none'")
    signed, e, man = m[1] != "u", int(m[2]), int(m[3])
    bias = int(m[4]) if m[4] is not None else None
    specials, subnormals = m[5] or "ieee", m[6] is None
    name = _canonical_spec(e, man, bias, signed, specials, subnormals)
    if name in _USER:
        return _USER[name]
    f = _user_record(name, e, man, bias, signed, specials, subnormals, "")
    _USER[name] = f
    return f


def user_formats() -> dict[str, Format]:
    """The formats defined in this process (define_format, parse_format), by name."""
    return dict(_USER)


def forget_format(name: str) -> None:
    """Unregister a user format (KeyError if there is none of that name)."""
    if name not in _USER:
        raise KeyError(f"no user format named {name!r}")
    del _USER[name]


def format_names() -> list[str]:
    return list(FORMATS)


def get_format(fmt: str | Format) -> Format:
    """A Format from its canonical name or an alias (case-insensitive).

    Unknown names raise ValueError listing the canonical names.
    """
    if isinstance(fmt, Format):
        return fmt
    if not isinstance(fmt, str):
        raise TypeError(f"format must be a name or a Format, not {type(fmt).__name__}")
    key = fmt.strip().lower().replace("-", "_")
    if key in _ALIASES:
        return FORMATS[_ALIASES[key]]
    m = _P3109_NAME.fullmatch(key)
    if m:
        return p3109(int(m[1]), int(m[2]), m[3] == "s", m[4] == "e")
    if key in _USER:
        return _USER[key]
    if _SPEC.fullmatch(key):
        return parse_format(key)
    user = f", defined: {', '.join(_USER)}" if _USER else ""
    raise ValueError(f"unknown format {fmt!r}; known formats: {', '.join(FORMATS)}{user}, the IEEE P3109 "
                     "formats binary{K}p{P}{s|u}{e|f} (K 3..16), and spec strings [u]e<E>m<M>[b<bias>][_<specials>]")
