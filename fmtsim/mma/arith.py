"""Integer pieces the matrix-unit models share: operand codes as (sign, integer
significand, exponent) tables, fp32 accumulators taken apart, exact bit lengths, and
rounding an integer times a power of two onto a float grid.

An operand code is split as value = sign * sig * 2^(exp - man_bits), where exp is the
exponent of the normalised form clamped at the format's smallest normal exponent
(so a subnormal keeps that exponent and sig < 2^man_bits), and sig includes the
implicit bit. This is the form the published models align on.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np

from ..formats import get_format

__all__ = ["OperandTable", "operand_table", "split_f32", "bit_length", "round_scaled", "to_f32",
           "CANONICAL_NAN", "WIDE_FORMATS", "IEEE_FORMATS", "ZERO_EXP"]

CANONICAL_NAN = np.uint32(0x7FFFFFFF)  # what NVIDIA and mmasim write for a NaN result
ZERO_EXP = -(1 << 20)  # exponent given to zero operands so that a zero product never sets the maximum

# the 16-bit IEEE-style inputs of fp16/bf16 units: (numpy dtype, man_bits, emin)
WIDE_FORMATS = {"fp16": (np.dtype(np.float16), 10, -14), "bf16": (np.dtype(ml_dtypes.bfloat16), 7, -126)}
# tf32 codes: the 19 high bits of an fp32 pattern (sign, 8 exponent, 10 fraction bits)
TF32 = ("tf32", 10, -126)
_WIDE_ALIASES = {"float16": "fp16", "f16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
                 "f32": "fp32", "xf32": "tf32", "float64": "fp64", "f64": "fp64", "double": "fp64"}
# fp32 / fp64 operands of the FMA-chain units (family "fma"): IEEE bit patterns (uint32 / uint64
# codes), decoded by a view, never through a per-code table
IEEE_FORMATS: dict[str, tuple[Any, Any]] = {"fp32": (np.dtype(np.uint32), np.dtype(np.float32)),
                "fp64": (np.dtype(np.uint64), np.dtype(np.float64))}

FINITE, INF, NAN = 0, 1, 2


@dataclass(frozen=True)
class OperandTable:
    """Per code: sign (int8, +1/-1), sig (int64 >= 0), exp (int32), cls (FINITE/INF/NAN)."""

    name: str
    man_bits: int
    emin: int
    n_codes: int
    sign: np.ndarray
    sig: np.ndarray
    exp: np.ndarray
    cls: np.ndarray
    values: np.ndarray  # float64 value of each code (NaN for NaN codes)


def canonical_operand_format(name: str) -> str:
    key = str(name).strip().lower()
    key = _WIDE_ALIASES.get(key, key)
    if key in WIDE_FORMATS or key in ("tf32", "fp32", "fp64"):
        return key
    return get_format(key).name


@cache
def operand_table(name: str) -> OperandTable:
    """The split of every code of a float format (fmtsim formats, plus fp16 and bf16)."""
    key = canonical_operand_format(name)
    if key in IEEE_FORMATS:
        raise ValueError(f"{key} operands have no code table: tf32 units truncate fp32 patterns to tf32 codes "
                         "first, and the fma units decode fp32 / fp64 bit patterns directly")
    if key == "tf32":
        man, emin = TF32[1], TF32[2]
        with np.errstate(invalid="ignore"):
            vals = (np.arange(1 << 19, dtype=np.uint32) << 13).view(np.float32).astype(np.float64)
    elif key in WIDE_FORMATS:
        dt, man, emin = WIDE_FORMATS[key]
        with np.errstate(invalid="ignore"):
            vals = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float64)
    else:
        f = get_format(key)
        if f.kind != "float":
            raise ValueError(f"matrix units take float operand formats; {f.name} is an integer format")
        man, emin = f.man_bits, f.emin
        vals = f.values.copy()
    with np.errstate(invalid="ignore"):
        cls = np.where(np.isnan(vals), NAN, np.where(np.isinf(vals), INF, FINITE)).astype(np.int8)
    sign = np.where(np.signbit(vals), -1, 1).astype(np.int8)
    fin = cls == FINITE
    mag = np.where(fin, np.abs(vals), 0.0)
    _, e2 = np.frexp(mag)
    exp = np.maximum(e2.astype(np.int64) - 1, emin)
    sig = np.ldexp(mag, (man - exp).astype(np.int32))
    assert np.array_equal(sig, np.floor(sig)), key
    sig = sig.astype(np.int64)
    exp = np.where(sig == 0, emin, exp).astype(np.int32)
    for a in (sign, sig, exp, cls, vals):
        a.flags.writeable = False
    return OperandTable(key, man, emin, vals.size, sign, sig, exp, cls, vals)


def split_f32(c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """fp32 values -> (sign +1/-1 int8, sig int64 (24 bits), exp int32 (>= -126), cls int8)."""
    bits = np.ascontiguousarray(c, dtype=np.float32).view(np.uint32)
    ef = ((bits >> 23) & 0xFF).astype(np.int32)
    man = (bits & 0x7FFFFF).astype(np.int64)
    sign = np.where(bits >> 31, -1, 1).astype(np.int8)
    cls = np.where(ef == 255, np.where(man == 0, INF, NAN), FINITE).astype(np.int8)
    sig = np.where(ef == 255, 0, np.where(ef > 0, man | (1 << 23), man))
    exp = np.where(ef > 0, ef - 127, -126).astype(np.int32)
    return sign, sig, exp, cls


def bit_length(x: np.ndarray) -> np.ndarray:
    """Exact bit length of non-negative int64 values (0 for 0)."""
    x = np.asarray(x, dtype=np.int64)
    _, n = np.frexp(x.astype(np.float64))
    n = n.astype(np.int64)
    # the float conversion can round up to the next power of two above 2^53: step back there
    return n - ((x >> np.maximum(n - 1, 0)) == 0) * (x > 0)


def round_scaled(neg: np.ndarray, mag: np.ndarray, x: np.ndarray, man_bits: int, emin: int, mode: str
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Round (-1)^neg * mag * 2^x (mag >= 0 int64 below 2^62) onto the grid of a float with
    ``man_bits`` fraction bits and smallest normal exponent ``emin`` (no largest: overflow is
    left to the caller). mode: 'rz' (toward zero), 'rne', 'rd' (toward -Inf).
    Returns (q, e): the rounded magnitude is q * 2^e, q < 2^(man_bits + 2)."""
    mag = np.asarray(mag, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64)
    ev = x + bit_length(mag) - 1
    ulp = np.maximum(ev, emin) - man_bits
    r = ulp - x
    exact = r <= 0
    rs = np.clip(r, 0, 63)
    q = np.where(exact, mag << np.clip(-r, 0, 63), mag >> rs)
    rem = mag - (q << rs)
    rem = np.where(exact, 0, rem)
    if mode == "rne":
        half = np.int64(1) << np.clip(rs - 1, 0, 62)
        up = (r <= 63) & ~exact & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        q = q + up
    elif mode == "rd":
        q = q + (np.asarray(neg) & (rem != 0))
    elif mode != "rz":
        raise ValueError(f"unknown rounding {mode!r}")
    return q, ulp


def to_f32(neg: np.ndarray, q: np.ndarray, e: np.ndarray, signed_zero: bool = False) -> np.ndarray:
    """(-1)^neg * q * 2^e (already on the fp32 grid) as float32; beyond the range: +-Inf.
    A zero is +0 unless ``signed_zero``."""
    with np.errstate(over="ignore"):
        v = np.ldexp(np.asarray(q, dtype=np.float64), np.clip(e, -2000, 2000).astype(np.int32)).astype(np.float32)
    if signed_zero:
        return np.where(neg, -v, v).astype(np.float32)
    return np.where(neg & (v != 0), -v, v).astype(np.float32)
