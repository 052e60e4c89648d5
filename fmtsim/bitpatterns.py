"""Bit patterns and exception flags as fmtsim prints them, in a form that reads back.

An input is printed as ``TYPE:0xHEX``, its type's tag and its bit pattern: ``f32:0x3a800000``,
``bf16:0x7f81``, ``f16:0x3c00``, ``f64:0x3ff0000000000000`` for the IEEE source types, and
``FORMAT:0xCODE`` (``e5m2:0x3c``) for a code of an fmtsim format (the operand of a
format-to-format conversion). ``fmtsim ver`` and ``fmtsim conform`` print inputs this way,
and ``fmtsim encode`` reads the same text back as the same input, NaN sign and payload
included (:func:`parse_pattern`). The hex digits are the pattern itself, most significant
first; fewer digits than the type's width are zero-extended (``f32:0x1`` is the smallest
subnormal), more bits than it holds are refused. A bare ``0x3a800000`` has no type, so it is
not a bit pattern: it could be the integer 981467136 as well, and ``fmtsim encode`` refuses it
rather than guess.

Flags are printed by name, with their TestFloat bit values in hex:
``inexact|overflow|saturated (0x25)``; no flag is ``none (0x00)`` (:func:`flags_text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .formats import get_format

__all__ = ["FLAG_BITS", "SOURCE_TAGS", "BitPattern", "parse_pattern", "pattern_text", "array_pattern",
           "flag_names", "flags_text", "short_value"]

# TestFloat / SoftFloat flag bits (fmtsim.rounding.FLAG_*), in bit order
FLAG_BITS: tuple[tuple[int, str], ...] = ((0x01, "inexact"), (0x02, "underflow"), (0x04, "overflow"),
                                          (0x08, "infinite"), (0x10, "invalid"), (0x20, "saturated"))

# tag -> (numpy dtype, source type name as fmtsim.encode_one's src names it)
SOURCE_TAGS: dict[str, tuple[np.dtype, str]] = {
    "f16": (np.dtype(np.float16), "float16"),
    "bf16": (np.dtype(ml_dtypes.bfloat16), "bfloat16"),
    "f32": (np.dtype(np.float32), "float32"),
    "f64": (np.dtype(np.float64), "float64"),
}
_LONG_NAMES = {name: tag for tag, (_, name) in SOURCE_TAGS.items()}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
_PATTERN = re.compile(r"(?P<tag>[a-z][a-z0-9_-]*):(?P<body>.*)", re.ASCII | re.S)
_HEX_BODY = re.compile(r"0x_?(?P<hex>[0-9a-f](?:_?[0-9a-f])*)", re.ASCII)


@dataclass(frozen=True)
class BitPattern:
    """One input given by its bits: an IEEE source type's pattern, or a code of an fmtsim format."""

    tag: str  # 'f16', 'bf16', 'f32', 'f64', or a canonical fmtsim format name
    bits: int

    @property
    def is_source_type(self) -> bool:
        return self.tag in SOURCE_TAGS

    @property
    def src(self) -> str:
        """The source type fmtsim.encode_one is told: the pattern's own IEEE type; a format's code
        reaches an encoder as the float32 it decodes to (as the fmt2fmt vector files convert it)."""
        return SOURCE_TAGS[self.tag][1] if self.is_source_type else "float32"

    def as_array(self) -> np.ndarray:
        """The input as a 1-element array of its IEEE type (a format's code: its float32 value)."""
        if self.is_source_type:
            dt = SOURCE_TAGS[self.tag][0]
            return np.array([self.bits], dtype=np.uint64).astype(_UINT[dt.itemsize]).view(dt)
        from .codec import decode

        return np.asarray(decode(np.array([self.bits]), self.tag, np.float32)).reshape(1)

    def value(self) -> float:
        """The input's value as a Python float (exact: float64 holds every float16, bfloat16 and
        float32 value); a NaN keeps its sign, which :meth:`ieee_bits` holds with the payload."""
        with np.errstate(invalid="ignore"):  # widening a signalling NaN: its bits are in ieee_bits()
            return float(self.as_array().astype(np.float64)[0])

    def ieee_bits(self) -> int:
        """The pattern in the type :attr:`src` names (a format's code: its float32 bits)."""
        a = self.as_array()
        return int(a.view(_UINT[a.dtype.itemsize])[0])

    def __str__(self) -> str:
        return pattern_text(self.tag, self.bits)


def _width_bits(tag: str) -> int:
    return SOURCE_TAGS[tag][0].itemsize * 8 if tag in SOURCE_TAGS else get_format(tag).bits


def pattern_text(tag: str, bits: int) -> str:
    """``TAG:0xHEX`` with every hex digit of the type's width, lower case: 'f32:0x3a800000'."""
    digits = (_width_bits(tag) + 3) // 4
    return f"{tag}:0x{bits:0{digits}x}"


def array_pattern(v: Any) -> str:
    """One element of a float16/bfloat16/float32/float64 array as its pattern text."""
    a = np.asarray(v).reshape(1)
    tag = next((t for t, (dt, _) in SOURCE_TAGS.items() if dt == a.dtype), None)
    if tag is None:
        raise TypeError(f"no bit pattern tag for dtype {a.dtype}")
    return pattern_text(tag, int(a.view(_UINT[a.dtype.itemsize])[0]))


def parse_pattern(text: str) -> BitPattern | None:
    """The bit pattern ``text`` spells (``f32:0x3a800000``, ``e5m2:0x3c``); None when it is not
    written as ``TAG:...``; ValueError naming the text and the problem when it is, but is not a
    valid pattern (unknown tag, no 0x, a digit that is not hex, more bits than the type holds)."""
    t = text.strip().lower()
    m = _PATTERN.fullmatch(t)
    if m is None:
        if t[:1] in "+-" and _PATTERN.fullmatch(t[1:]):
            raise ValueError(f"{text!r}: a bit pattern takes no sign (the sign is its top bit)")
        return None
    tag, body = m["tag"], m["body"]
    tag = _LONG_NAMES.get(tag, tag)
    if tag not in SOURCE_TAGS:
        try:
            tag = get_format(tag).name
        except ValueError:
            raise ValueError(f"{text!r}: unknown bit pattern type {m['tag']!r} (f16, bf16, f32, f64, or a "
                             "format name such as e5m2 for one of its codes)") from None
    h = _HEX_BODY.fullmatch(body)
    if h is None:
        raise ValueError(f"{text!r}: a bit pattern is {tag}:0x followed by hex digits (such as "
                         f"{pattern_text(tag, 0)})")
    bits = int(h["hex"].replace("_", ""), 16)
    width = _width_bits(tag)
    if bits >> width:
        raise ValueError(f"{text!r}: {bits:#x} has more than the {width} bits of a {tag} pattern")
    if tag not in SOURCE_TAGS:
        f = get_format(tag)
        if bits >= f.n_codes:
            raise ValueError(f"{text!r}: {f.name} codes are 0..{f.n_codes - 1:#x}")
    return BitPattern(tag, bits)


def flag_names(flags: int) -> str:
    """The flags raised, by name, in bit order: 'inexact|overflow|saturated'; 'none' for 0."""
    names = [name for bit, name in FLAG_BITS if flags & bit]
    unknown = flags & ~sum(bit for bit, _ in FLAG_BITS)
    if unknown:
        names.append(f"unknown {unknown:#04x}")
    return "|".join(names) or "none"


def flags_text(flags: int) -> str:
    """Flags by name with their value as the vector files write it: 'inexact|saturated (0x21)'."""
    return f"{flag_names(flags)} ({flags:#04x})"


def short_value(v: Any) -> str:
    """An element of a float array as the shortest decimal that reads back as it in float64 (which
    holds every float16, bfloat16 and float32 exactly, so no digit is rounded into another type's
    value): '0.10000000149011612', '65504', '-0', '-nan', '1e-45'. For messages; the pattern is the input."""
    with np.errstate(all="ignore"):  # exact widening (ml_dtypes warns on bfloat16 Inf/NaN)
        x = float(np.asarray(v).reshape(1).astype(np.float64)[0])
    sign = "-" if np.signbit(x) else ""
    if x != x:
        return f"{sign}nan"
    if np.isinf(x) or x == 0:
        return f"{sign}{'inf' if x else '0'}"
    if 1e-4 <= abs(x) < 1e16:
        return np.format_float_positional(x, unique=True, trim="-")
    return np.format_float_scientific(x, unique=True, trim="-")
