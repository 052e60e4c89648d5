"""The IEEE binary types fmtsim converts from: float16, bfloat16, float32 and float64.

One :class:`SourceType` record per type holds its field widths and the numpy dtypes that hold
its values and its bit patterns; everything else (precision, exponent range, the quiet bit)
derives from the widths, so the encoder, the oracle and the implementations read one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import ml_dtypes
import numpy as np

__all__ = ["SOURCE_NAMES", "SOURCE_TYPES", "SourceName", "SourceType", "source_of", "source_type"]

SourceName = Literal["float16", "bfloat16", "float32", "float64"]
SOURCE_NAMES: tuple[SourceName, ...] = get_args(SourceName)


@dataclass(frozen=True)
class SourceType:
    """One IEEE 754 binary interchange type (bfloat16: IEEE-style, 8 exponent bits, 7 fraction bits)."""

    name: SourceName
    exp_bits: int
    man_bits: int  # the trailing significand field
    dtype: np.dtype  # holds its values
    bits_dtype: np.dtype  # the unsigned integer of its width: holds its bit patterns

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def precision(self) -> int:
        """Significant bits, the implicit one included."""
        return self.man_bits + 1

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emax(self) -> int:
        return self.bias

    @property
    def emin(self) -> int:
        """The exponent of the smallest normal."""
        return 1 - self.bias

    @property
    def quiet_bit(self) -> int:
        """The significand's top bit: set in a quiet NaN, clear in a signalling one."""
        return 1 << (self.man_bits - 1)

    @property
    def sign_bit(self) -> int:
        return 1 << (self.width - 1)


SOURCE_TYPES: dict[str, SourceType] = {
    "float16": SourceType("float16", 5, 10, np.dtype(np.float16), np.dtype(np.uint16)),
    "bfloat16": SourceType("bfloat16", 8, 7, np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16)),
    "float32": SourceType("float32", 8, 23, np.dtype(np.float32), np.dtype(np.uint32)),
    "float64": SourceType("float64", 11, 52, np.dtype(np.float64), np.dtype(np.uint64)),
}


def source_type(name: str) -> SourceType:
    """The record of the source type called ``name`` (ValueError naming the choices otherwise)."""
    try:
        return SOURCE_TYPES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown source type {name!r}; choose one of: {', '.join(SOURCE_NAMES)}") from None


def source_of(dtype: np.dtype) -> SourceType | None:
    """The source type whose values ``dtype`` holds, or None."""
    return next((s for s in SOURCE_TYPES.values() if s.dtype == dtype), None)
