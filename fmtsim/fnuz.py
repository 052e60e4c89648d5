"""OCP <-> FNUZ re-encoding of FP8 codes, exactly, and the scales that go with it.

The same bits read as FNUZ are worth exactly half of their OCP value (the bias
is one larger) for every finite code, subnormals included (docs/rules.md §6).
So an OCP tensor becomes FNUZ by keeping its bits and doubling every scale
that multiplies it. A few codes need a rule, and each rule is explicit:

    OCP -> FNUZ
      0x80 (-0)                  -> 0x00 (0x80 is NaN in FNUZ)
      NaN codes                  -> 0x80 (E4M3 0x7F/0xFF; E5M2 0x7D-0x7F, 0xFD-0xFF).
                                    vLLM's in-place normalisation turns them into
                                    +-240: fmtsim does not.
      E5M2 +-Inf (0x7C/0xFC)     -> no FNUZ encoding; ``inf=`` must say:
                                    'nan'     -> 0x80
                                    'max'     -> FNUZ +-max, 0x7F/0xFF (after the scale
                                                 doubling: +-114688, twice OCP's max)
                                    'ocp_max' -> 0x7B/0xFB (+-57344 after doubling, the
                                                 value OCP saturation would give)
                                    None (default) raises if any Inf is present.
    FNUZ -> OCP (scale halved)
      0x80 (NaN)                 -> 0x7F (OCP's canonical NaN)
      codes worth more than OCP's max after halving the scale (E4M3 0x7F/0xFF = +-240;
      E5M2 0x7C-0x7F/0xFC-0xFF) have no OCP encoding; ``unrepresentable=`` must say:
                                    'nan'  -> 0x7F
                                    'max'  -> OCP +-max (0x7E/0xFE, 0x7B/0xFB)
                                    'inf'  -> +-Inf (E5M2 only)
                                    None (default) raises if any are present.

Round trips are exact on every code that has a value in both encodings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrays import as_numpy
from .formats import get_format

__all__ = ["ScaleOverflowError", "ConversionReport", "ocp_to_fnuz", "fnuz_to_ocp", "scale_by_power_of_two", "PAIRS"]

PAIRS = {"e4m3": "e4m3fnuz", "e5m2": "e5m2fnuz"}
_INF_CHOICES = ("nan", "max", "ocp_max")
_UNREP_CHOICES = ("nan", "max", "inf")


class ScaleOverflowError(OverflowError, ValueError):
    """A finite scale that would become Inf in its own dtype. Both an OverflowError (as
    float arithmetic reports it) and a ValueError (bad input, as the API contract says)."""


@dataclass
class ConversionReport:
    """What a conversion met and did; ``scale_multiplier`` applies to every scale."""

    source: str
    target: str
    elements: int = 0
    scale_multiplier: float = 1.0
    neg_zero: int = 0
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    unrepresentable: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _codes(codes: Any, fmt: str, expect_fnuz: bool) -> np.ndarray:
    """uint8 codes from an integer array or an ml_dtypes FP8 array of the right kind."""
    arr = as_numpy(codes, "codes")
    if arr.dtype.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            bad = int(np.argmax((arr.reshape(-1) < 0) | (arr.reshape(-1) > 255)))
            raise ValueError(f"code {arr.reshape(-1)[bad]} at flat index {bad} is not a byte")
        return arr.astype(np.uint8)
    if arr.dtype.itemsize == 1 and arr.dtype.type.__module__.startswith("ml_dtypes"):
        name = arr.dtype.name
        is_fnuz = name.endswith("fnuz")
        wanted = get_format(PAIRS[fmt] if expect_fnuz else fmt).ml_dtypes_name
        if name != wanted:
            state = "FNUZ" if is_fnuz else "OCP"
            raise ValueError(f"input dtype is {name} ({state}); expected {wanted}")
        return arr.view(np.uint8)
    raise TypeError(f"codes must be uint8 or an ml_dtypes FP8 array, not {arr.dtype}")


def _check_fmt(fmt: str) -> str:
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be 'e4m3' or 'e5m2', not {type(fmt).__name__}")
    name = get_format(fmt).name
    if name not in PAIRS:
        raise ValueError(f"OCP<->FNUZ conversion exists for e4m3 and e5m2, not {fmt!r}")
    return name


def ocp_to_fnuz(codes: Any, fmt: str = "e4m3", *, inf: str | None = None
                ) -> tuple[np.ndarray, float, ConversionReport]:
    """(FNUZ codes, scale multiplier 2.0, report) for OCP ``fmt`` codes; see the module doc.

    The input is never modified; the output is a new uint8 array of the same shape.
    """
    name = _check_fmt(fmt)
    if inf is not None and (not isinstance(inf, str) or inf not in _INF_CHOICES):
        raise ValueError(f"inf must be one of {', '.join(_INF_CHOICES)} (or None to refuse Inf), not {inf!r}")
    src = _codes(codes, name, expect_fnuz=False)
    f = get_format(name)
    out = src.copy()
    rep = ConversionReport(name, PAIRS[name], elements=int(src.size), scale_multiplier=2.0)
    negzero = src == 0x80
    nan = np.isin(src, f.nan_codes)
    rep.neg_zero = int(negzero.sum())
    rep.nan = int(nan.sum())
    out[negzero] = 0x00
    out[nan] = 0x80
    if f.has_inf:
        pos, neg = src == 0x7C, src == 0xFC
        rep.pos_inf, rep.neg_inf = int(pos.sum()), int(neg.sum())
        if rep.pos_inf or rep.neg_inf:
            if inf is None:
                first = int(np.argmax((pos | neg).reshape(-1)))
                raise ValueError(
                    f"{rep.pos_inf + rep.neg_inf} {name} Inf code(s) (first at flat index {first}) have "
                    "no FNUZ encoding; pass inf='nan', 'max' or 'ocp_max'"
                )
            if inf == "nan":
                out[pos | neg] = 0x80
            elif inf == "max":
                out[pos], out[neg] = 0x7F, 0xFF
            else:
                out[pos], out[neg] = 0x7B, 0xFB
            rep.notes.append(f"Inf -> {inf}")
    return out, 2.0, rep


def fnuz_to_ocp(codes: Any, fmt: str = "e4m3", *, unrepresentable: str | None = None
                ) -> tuple[np.ndarray, float, ConversionReport]:
    """(OCP codes, scale multiplier 0.5, report) for FNUZ codes of ``fmt``'s pair."""
    name = _check_fmt(fmt)
    if unrepresentable is not None and (not isinstance(unrepresentable, str)
                                        or unrepresentable not in _UNREP_CHOICES):
        raise ValueError(f"unrepresentable must be one of {', '.join(_UNREP_CHOICES)} or None, "
                         f"not {unrepresentable!r}")
    if unrepresentable == "inf" and name != "e5m2":
        raise ValueError("unrepresentable='inf': OCP e4m3 has no Inf")
    src = _codes(codes, name, expect_fnuz=True)
    ocp = get_format(name)
    out = src.copy()
    rep = ConversionReport(PAIRS[name], name, elements=int(src.size), scale_multiplier=0.5)
    nan = src == 0x80
    rep.nan = int(nan.sum())
    # FNUZ codes whose bits mean Inf or NaN in OCP: worth more than OCP's max
    special = np.isin(src, ocp.nan_codes + ocp.inf_codes) & ~nan
    rep.unrepresentable = int(special.sum())
    if rep.unrepresentable:
        if unrepresentable is None:
            first = int(np.argmax(special.reshape(-1)))
            raise ValueError(
                f"{rep.unrepresentable} FNUZ code(s) (first at flat index {first}) exceed OCP {name}'s "
                "range; pass unrepresentable='nan', 'max' or 'inf' (e5m2)"
            )
        negative = (src & 0x80) != 0
        if unrepresentable == "nan":
            out[special] = 0x7F
        elif unrepresentable == "max":
            top = max(c for c in range(0x80) if np.isfinite(ocp.values[c]))
            out[special] = np.where(negative[special], top | 0x80, top)
        else:
            out[special] = np.where(negative[special], 0xFC, 0x7C)
        rep.notes.append(f"out of range -> {unrepresentable}")
    out[nan] = 0x7F
    return out, 0.5, rep


def scale_by_power_of_two(scale: Any, factor: float, what: str = "scale") -> np.ndarray:
    """``scale * factor`` in the scale's own float dtype, exactly.

    scale: a float array (float16, bfloat16, float32, float64, ...). factor: a power of
    two (2 and 0.5 for FNUZ; int or float, bool refused); anything else raises
    TypeError/ValueError. Raises :class:`ScaleOverflowError` (an OverflowError and a
    ValueError) if a finite scale would become Inf, and ValueError if the product would
    lose bits (a subnormal result). NaN and Inf scales pass through.
    """
    if isinstance(factor, (bool, np.bool_)) or not isinstance(factor, (int, float, np.integer, np.floating)):
        raise TypeError(f"factor must be a power of two (a number), not {type(factor).__name__}")
    f64 = float(factor)
    if not (np.isfinite(f64) and f64 > 0 and np.frexp(f64)[0] == 0.5):
        raise ValueError(f"factor must be a power of two such as 2 or 0.5, not {factor!r}")
    factor = f64
    arr = as_numpy(scale, "scale")
    if arr.dtype.kind != "f" and not (arr.dtype.itemsize == 2 and arr.dtype.name == "bfloat16"):
        raise TypeError(f"{what}: scales must be floating point, not {arr.dtype}")
    wide = arr.astype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        out = (wide * factor).astype(arr.dtype)
        back = out.astype(np.float64)
        undone = back / factor  # exact for a power of two unless the product was rounded
    finite = np.isfinite(wide)
    overflow = finite & ~np.isfinite(back)
    if overflow.any():
        i = int(np.argmax(overflow.reshape(-1)))
        raise ScaleOverflowError(f"{what}: {wide.reshape(-1)[i]!r} * {factor} overflows {arr.dtype} (flat index {i})")
    inexact = finite & (undone != wide)
    if inexact.any():
        i = int(np.argmax(inexact.reshape(-1)))
        raise ValueError(f"{what}: {wide.reshape(-1)[i]!r} * {factor} is not exact in {arr.dtype} (flat index {i})")
    return out
