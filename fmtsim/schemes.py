"""Storage cost of every block-scaled scheme, in bits per element."""

from __future__ import annotations

import re

from .argcheck import integer, optional_integer
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

    group_size, tensor_elements, element_bits: integers >= 1 or None; scale_bits,
    zero_point_bits: integers >= 0. element_bits overrides an MX scheme's element width
    only (NVFP4 and int<b> fix theirs). Bad arguments raise TypeError or ValueError.
    """
    if not isinstance(scheme, str):
        raise TypeError(f"scheme must be a name such as 'mxfp4', 'nvfp4' or 'int4', not {type(scheme).__name__}")
    group_size = optional_integer(group_size, "group_size", low=1)
    scale_bits = optional_integer(scale_bits, "scale_bits", low=0)
    element_bits = optional_integer(element_bits, "element_bits", low=1)
    zero_point_bits = integer(zero_point_bits, "zero_point_bits", low=0)
    tensor_elements = optional_integer(tensor_elements, "tensor_elements", low=1)
    s = scheme.lower()
    m = re.fullmatch(r"u?int(\d+)", s)
    if element_bits is not None and (s == "nvfp4" or m):
        raise ValueError(f"element_bits applies to MX schemes; {scheme!r} fixes its element width")
    if s == "nvfp4":
        bits = 4 + (8 if scale_bits is None else scale_bits) / (group_size or 16)
        return bits + (32 / tensor_elements if tensor_elements else 0.0)
    if m:
        if group_size is None or scale_bits is None:
            raise ValueError("integer schemes need group_size and scale_bits")
        eb = int(m.group(1))
        if eb < 1:
            raise ValueError(f"{scheme!r}: an integer element has at least 1 bit")
        return eb + (scale_bits + zero_point_bits) / group_size
    key = _scheme(s)
    from .formats import get_format

    eb = element_bits if element_bits is not None else get_format(MX_SCHEMES[key]).bits
    return eb + (8 if scale_bits is None else scale_bits) / (group_size or 32)
