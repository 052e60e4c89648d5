"""Storage cost of every block-scaled scheme, in bits per element."""

from __future__ import annotations

import re

from .mx import SCHEMES as MX_SCHEMES
from .mx import _scheme

__all__ = ["effective_bits"]


def effective_bits(
    scheme: str,
    *,
    group_size: int | None = None,
    scale_bits: int | None = None,
    element_bits: int | None = None,
    zero_point_bits: int = 0,
    tensor_elements: int | None = None,
) -> float:
    """element bits + scale bits / group size (+ zero point, + amortised tensor scale).

    scheme: an MX scheme ('mxfp4', 'mxfp8_e4m3', ...: E8M0 scale per 32 by default),
    'nvfp4' (UE4M3 per 16, plus one FP32 per ``tensor_elements`` if given), or
    'int<b>' / 'uint<b>' with ``group_size`` and ``scale_bits`` (e.g. 16 for an FP16
    scale) and ``zero_point_bits`` for asymmetric schemes.
    """
    s = scheme.lower()
    if s == "nvfp4":
        bits = 4 + (8 if scale_bits is None else scale_bits) / (group_size or 16)
        return bits + (32 / tensor_elements if tensor_elements else 0.0)
    m = re.fullmatch(r"u?int(\d+)", s)
    if m:
        if group_size is None or scale_bits is None:
            raise ValueError("integer schemes need group_size and scale_bits")
        eb = int(m.group(1))
        return eb + (scale_bits + zero_point_bits) / group_size
    key = _scheme(s)
    from .formats import get_format

    eb = element_bits if element_bits is not None else get_format(MX_SCHEMES[key]).bits
    return eb + (8 if scale_bits is None else scale_bits) / (group_size or 32)
