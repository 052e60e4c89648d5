"""Human-readable descriptions of formats and codes: the rows behind
``fmtsim formats``, ``fmtsim table`` and the committed spec_tables/.

Values are printed exactly: as a hex float (``float.hex``) and as the full
decimal expansion (every value of these formats is a dyadic rational, so the
expansion is finite).
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from .formats import FORMATS, Format, get_format, power_text

__all__ = ["exact_decimal", "exact_text", "hex_value", "code_bits", "code_rows", "format_rows",
           "CODE_COLUMNS", "FORMAT_COLUMNS"]

CODE_COLUMNS = ["code", "bits", "class", "hex_value", "value"]
FORMAT_COLUMNS = ["name", "bits", "exp", "man", "bias", "max_finite", "min_normal",
                  "min_subnormal", "emax", "inf_codes", "nan_codes", "neg_zero", "ml_dtypes",
                  "description"]


def exact_decimal(v: Fraction | float) -> str:
    """Exact decimal expansion of a dyadic rational (or 'nan', 'inf', '-inf', '-0')."""
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        v = Fraction(v)
    if v.denominator == 1:
        return str(v.numerator)
    den = v.denominator
    k = den.bit_length() - 1
    assert den == 1 << k, "not a dyadic rational"
    sign = "-" if v < 0 else ""
    digits = str(abs(v.numerator) * 5**k).rjust(k + 1, "0")
    return f"{sign}{digits[:-k]}.{digits[-k:]}"


def hex_value(v: Fraction | float) -> str:
    """C99 hex float, shortest normalized form ('0x1.8p+2', '0x1p-16383'), exact for any dyadic
    value (beyond float64's range too); 'nan'/'inf' for specials."""
    if isinstance(v, float):
        return exact_decimal(v)
    if v == 0:
        return "0x0p+0"
    n, k = abs(v.numerator), v.denominator.bit_length() - 1
    assert v.denominator == 1 << k, "not a dyadic rational"
    top = n.bit_length() - 1  # v = n * 2^-k = 1.f * 2^(top - k)
    frac_bits = n - (1 << top)
    digits = (top + 3) // 4
    frac = format(frac_bits << (4 * digits - top), f"0{digits}x").rstrip("0") if digits else ""
    return f"{'-' if v < 0 else ''}0x1{'.' + frac if frac else ''}p{top - k:+d}"


def exact_text(v: Fraction | float) -> str:
    """A value exactly, for people: its decimal expansion, or (beyond 2^+-1100, where that runs to
    hundreds of digits: wide P3109 formats reach 2^16382) m*2^e."""
    if isinstance(v, Fraction) and v != 0 and abs(_binary_exponent(v)) > 1100:
        return power_text(v)
    return exact_decimal(v)


def _binary_exponent(v: Fraction) -> int:
    return abs(v.numerator).bit_length() - v.denominator.bit_length()


def code_bits(fmt: Format, code: int) -> str:
    """The code's bits split into fields: 's.eeee.mmm' (floats) or plain binary."""
    b = format(code, f"0{fmt.bits}b")
    if fmt.kind == "int":
        return b
    parts = []
    i = 0
    if fmt.signed:
        parts.append(b[0])
        i = 1
    parts.append(b[i : i + fmt.exp_bits])
    if fmt.man_bits:
        parts.append(b[i + fmt.exp_bits :])
    return ".".join(parts)


def _value_text(fmt: Format, code: int) -> tuple[str, str]:
    v = fmt.code_value(code)
    if fmt.code_class(code) == "zero" and code & fmt.sign_mask and fmt.kind == "float":
        return "-0x0p+0", "-0"
    return hex_value(v), exact_text(v)


def code_rows(fmt: str | Format) -> list[list[str]]:
    """One row per code: hex code, fields, class, exact hex float, exact decimal."""
    f = get_format(fmt)
    width = (f.bits + 3) // 4
    rows = []
    for c in range(f.n_codes):
        hx, dec = _value_text(f, c)
        rows.append([f"0x{c:0{width}X}", code_bits(f, c), f.code_class(c), hx, dec])
    return rows


def _short(v: Fraction | None) -> str:
    """Exact, but large or tiny powers of two as 2^k."""
    if v is None:
        return "-"
    n, d = v.numerator, v.denominator
    if n > 0 and (n & (n - 1)) == 0 and (d & (d - 1)) == 0:
        k = n.bit_length() - d.bit_length()
        if abs(k) > 10:
            return f"2^{k}"
    return exact_text(v)


def format_rows(formats: Iterable[Format] | None = None) -> list[list[str]]:
    """One row of properties per format (default: the built-in ones)."""
    rows = []
    for f in FORMATS.values() if formats is None else formats:
        rows.append([
            f.name,
            str(f.bits),
            str(f.exp_bits) if f.is_float else "-",
            str(f.man_bits) if f.is_float else "-",
            str(f.bias) if f.is_float else "-",
            _short(f.max_finite),
            _short(f.min_normal),
            _short(f.min_subnormal),
            str(f.emax),
            " ".join(f"0x{c:0{(f.bits + 3) // 4}X}" for c in f.inf_codes) or "-",
            " ".join(f"0x{c:0{(f.bits + 3) // 4}X}" for c in f.nan_codes) or "-",
            "yes" if f.has_neg_zero else "no",
            f.ml_dtypes_name or "-",
            f.title,
        ])
    return rows
