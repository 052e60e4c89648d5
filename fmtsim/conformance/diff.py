"""What each profile (dialect) produces for the inputs where implementations disagree.

The built-in set (docs/rules.md §2 and §7): NaN and Inf in every direction, the
overflow ties, the ties that were rounded up in shipped code, double rounding,
E8M0 ties and specials, FNUZ negative zero.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..codec import encode
from ..formats import get_format
from ..policy import PROFILES

__all__ = ["DIVERGENCE_SET", "diff_rows"]

# (format, value, source dtype, why it is interesting)
DIVERGENCE_SET: list[tuple[str, float, str, str]] = [
    ("e4m3", math.nan, "float32", "NaN: canonical 0x7F (PTX) or sign kept (ml_dtypes)"),
    ("e4m3", -math.nan, "float32", "negative NaN"),
    ("e4m3", math.inf, "float32", "Inf: 448 saturating, NaN otherwise"),
    ("e4m3", 464.0, "float32", "overflow tie: rounds to 448 (even)"),
    ("e4m3", 465.0, "float32", "just past the tie: overflow"),
    ("e4m3", 1.0625 + 2.0**-40, "float64", "double rounding through float32 gives 1.0"),
    ("e5m2", math.nan, "float32", "NaN: 0x7F (PTX) or 0x7E (ml_dtypes)"),
    ("e5m2", math.inf, "float32", "Inf: 57344 saturating, Inf otherwise"),
    ("e5m2", 61440.0, "float32", "overflow tie: rounds up to 2^16, overflows"),
    ("e2m1", math.nan, "float32", "FP4 has no NaN: error, +6 (PTX) or -0 (ml_dtypes)"),
    ("e2m1", 5.0, "float32", "tie between 4 and 6: 4 (shipped code rounded up)"),
    ("e2m1", 0.25, "float32", "tie between 0 and 0.5: 0"),
    ("e2m1", 7.0, "float32", "overflow: saturates to 6"),
    ("e2m1", -0.0, "float32", "-0.0: 0x8, but TransformerEngine's reference cast writes 0x0"),
    ("e2m3", math.nan, "float32", "FP6 has no NaN"),
    ("e3m2", 30.0, "float32", "overflow tie of E3M2"),
    ("e8m0", 3.0, "float32", "tie 1.5*2^1: the even code 0x80 (2) or up (0x81: 4, ml_dtypes)"),
    ("e8m0", 0.75, "float32", "tie 1.5*2^-1: the even code 0x7E (0.5) or up (0x7F: 1)"),
    ("e8m0", 0.0, "float32", "no zero in E8M0: NaN"),
    ("e8m0", 2.0**-130, "float32", "below 2^-127"),
    ("e8m0", 1.2 * 2.0**-127, "float32", "float32 subnormal: ml_dtypes 0.6 gives 0x01"),
    ("e4m3fnuz", -0.0, "float32", "FNUZ has no -0: 0x00"),
    ("e4m3fnuz", -1e-30, "float32", "tiny negative rounds to 0x00"),
    ("e4m3fnuz", math.nan, "float32", "the only NaN is 0x80"),
    ("e5m2fnuz", math.inf, "float32", "Inf: 57344 saturating, 0x80 otherwise"),
]


def _cell(x: np.ndarray, fmt: str, profile: str) -> str:
    try:
        code = int(encode(x, fmt, profile=profile))
    except ValueError as e:
        return "error: " + str(e).split(";")[0].split(" and ")[0]
    return _shown(code, fmt)


def _shown(code: int, fmt: str) -> str:
    """A code and its exact value, as ``fmtsim encode`` and ``table`` print it (0x1D (0.1015625))."""
    from ..describe import _value_text

    return f"0x{code:02X} ({_value_text(get_format(fmt), code)[1]})"


def _ml_dtypes_cell(x: np.ndarray, fmt: str) -> str:
    f = get_format(fmt)
    if f.ml_dtype is None or f.kind != "float":
        return "-"
    with np.errstate(invalid="ignore", over="ignore"):
        code = int(np.asarray(x).reshape(1).astype(f.ml_dtype).view(np.uint8)[0])
    return _shown(code, fmt)


def diff_rows(values: list[tuple[str, Any, str, str]] | None = None,
              profiles: list[str] | None = None,
              formats: list[str] | None = None) -> tuple[list[str], list[list[str]]]:
    """(headers, rows): one column per profile plus ml_dtypes' actual array cast.
    '*' marks rows where the profiles disagree; '!' where ml_dtypes itself differs from
    the profile that models it (a known divergence of that implementation).

    values: (format, value, source dtype name, note); a value already of the source dtype is
    used as it is (the CLI rounds exact inputs once into it). formats: keep only these formats'
    rows (of the built-in set when values is None)."""
    names = profiles or list(PROFILES)
    rows = []
    chosen = values if values is not None else DIVERGENCE_SET
    if formats is not None:
        chosen = [v for v in chosen if v[0] in formats]
    for fmt, value, src, why in chosen:
        x = np.array(value, dtype=np.float64 if src == "float64" else np.float32)
        cells = [_cell(x, fmt, p) for p in names]
        actual = _ml_dtypes_cell(x, fmt)
        mark = "*" if len(set(cells)) > 1 else ""
        if "ml_dtypes" in names and actual != "-" and actual != cells[names.index("ml_dtypes")]:
            mark += "!"
        value = float(value)
        shown = ("-nan" if math.copysign(1.0, value) < 0 else "nan") if math.isnan(value) else repr(value)
        rows.append([mark, fmt, shown, src] + cells + [actual, why])
    headers = ["", "format", "input", "source"] + [f"profile {p}" for p in names] + ["ml_dtypes astype", "note"]
    return headers, rows
