"""``gfloat``: graphcore-research's gfloat, ``round_float`` (TiesToEven, sat=False) then
``encode_float``, with its OCP format infos and its IEEE P3109 ``format_info_p3109`` for the 30
Binary8 formats (float32 and float64 input), held to fmtsim's ``gfloat`` profile; and
``decode_ndarray`` of every code. Its named divergences are ``gfloat.*``
below (gfloat raises on FP4/FP6 overflow: such inputs are left to that
divergence, as is NaN into FP4/FP6, which the profile refuses)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...formats import Format, get_format, p3109_formats
from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request

OCP_FORMATS = ("e4m3", "e5m2", "e8m0", "e2m1", "e3m2", "e2m3")
P3109_FORMATS = tuple(f.name for f in p3109_formats(range(8, 9)))
FORMATS = OCP_FORMATS + P3109_FORMATS


def _info(fmt: str) -> Any:
    from gfloat import formats as gff

    if fmt in OCP_FORMATS:
        return getattr(gff, f"format_info_ocp_{fmt}")
    import gfloat

    f = get_format(fmt)
    return gff.format_info_p3109(f.bits, f.man_bits + 1, gfloat.Signedness.Signed if f.signed else
                                 gfloat.Signedness.Unsigned,
                                 gfloat.Domain.Extended if f.specials == "top_inf" else gfloat.Domain.Finite)


def _encode(x: np.ndarray, fmt: str) -> np.ndarray:
    # the scalar pair, one value at a time: gfloat's round_ndarray/encode_ndarray disagree with
    # it on E8M0 (0 -> 0x00, tiny values -> -1), and the scalar pair is what gfloat documents
    import gfloat

    fi = _info(fmt)
    if fmt in P3109_FORMATS:  # its array pair (the same answers as the scalar one on P3109 formats), fast
        from gfloat.encode_ndarray import encode_ndarray
        from gfloat.round_ndarray import round_ndarray

        with np.errstate(all="ignore"):
            return np.asarray(encode_ndarray(fi, round_ndarray(fi, np.asarray(x, dtype=np.float64))), np.int64)
    out = np.empty(x.shape, np.int64)
    with np.errstate(invalid="ignore"):  # NaN inputs are cases: widening them is not an error
        values = np.asarray(x, dtype=np.float64).tolist()
    for i, v in enumerate(values):
        try:
            out[i] = gfloat.encode_float(fi, gfloat.round_float(fi, v))
        except (ValueError, OverflowError):  # an overflow it cannot write: the gfloat.overflow_raises divergence
            out[i] = -1
    return out


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    import gfloat

    return np.asarray(gfloat.decode_ndarray(_info(fmt), np.asarray(codes, dtype=np.int64))).astype(np.float32)


def _gfloat_overflow(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.abs(np.asarray(x, dtype=np.float64))
    return ~np.isnan(a) & (a > float(fmt.max_finite))


def _gfloat_unsigned_negative(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a < 0) & ~np.isnan(a)


def _gfloat_e8m0_underflow(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a > 0) & (a < 1.5 * 2.0**-128)


# this implementation's named divergences (its bugs, each with the exact inputs it concerns)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "gfloat.overflow_raises",
        "gfloat",
        ("e2m1", "e3m2", "e2m3"),
        ("float32", "float64"),
        "gfloat's round_float(sat=False) raises ValueError when a value overflows a format "
        "with neither Inf nor NaN; fmtsim saturates (there is nothing else to write).",
        _gfloat_overflow,
    ),
    Divergence(
        "gfloat.e8m0_underflow_nan",
        "gfloat",
        ("e8m0",),
        ("float32", "float64"),
        "gfloat rounds positive values below 1.5*2^-128 (0.75 of the smallest scale 2^-127; measured "
        "on gfloat 0.5 by bisection) toward a zero that E8M0 lacks and writes NaN 0xFF; fmtsim "
        "writes the smallest scale 0x00.",
        _gfloat_e8m0_underflow,
    ),
    Divergence(
        "gfloat.p3109_unsigned_negative",
        "gfloat",
        tuple(n for n in P3109_FORMATS if n[9] == "u"),
        ("float32", "float64"),
        "gfloat's round_float returns a negative value unchanged for an unsigned P3109 format (it takes "
        "the sign only where the format is signed), and encode_float then writes a code of the "
        "magnitude or fails; fmtsim's gfloat profile clamps negatives to 0, the rule of its unsigned "
        "formats (P3109's own projections: 0 under SatFinite/SatPropagate, NaN under SatNone).",
        _gfloat_unsigned_negative,
    ),
)


class Gfloat(Implementation):
    name = "gfloat"
    summary = "gfloat round_float (TiesToEven, sat=False) + encode_float, OCP and P3109 Binary8 format infos"
    requires = ("gfloat",)
    install = 'pip install "fmtsim[peers]"'
    capabilities = ("decode", "encode")
    profiles = ("gfloat",)
    checked_with = "gfloat 0.5"
    divergences = DIVERGENCES

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("gfloat", _decode, FORMATS)]

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter("gfloat", _encode, profile="gfloat", formats=FORMATS, sources=("float32", "float64"),
                        divergences=DIVERGENCES)]


IMPLEMENTATIONS = [Gfloat()]
