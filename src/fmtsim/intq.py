"""Integer quantization with a float scale: per tensor, per channel or per group.

    symmetric   codes in -(2^(b-1)-1) .. 2^(b-1)-1, zero point 0,
                s = max|x| / (2^(b-1) - 1)
    asymmetric  codes in 0 .. 2^b - 1; the range [a, b] is first extended to hold 0
                (a = min(min x, 0), b = max(max x, 0)); s = (b - a) / (2^b - 1),
                z = clamp(round(-a / s), 0, 2^b - 1); code = clamp(round(x / s) + z)

for b in 2..8. A block whose values are all zero gets s = 1, z = 0. The scale is
computed in float64 and then stored in ``scale_dtype`` (float32 by default; float16
or float64 on request), and the codes are rounded against the *stored* scale, so
``dequantize`` reproduces exactly what a kernel reading the stored scale computes.
round(): half to even, decided exactly: the comparison of x with (k + 1/2) * s uses an
error-free product, so a float64 quotient that merely rounds onto .5 never decides a
tie. (Example: with s = float32(2/15), slightly above 2/15, x = 0.2 is just below
the 1.5 tie and gets code 1; with a float64 scale the same x gets 2.)

Layouts: ``channel_axis=k`` gives one scale per index along k (scale shape broadcasts
against x); ``group_size=g`` gives groups of g consecutive elements along ``axis``
(scale shape: x's with that axis divided by g); neither gives one scale for the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .block import Blocks, merge, scales_from_layout, scales_to_layout, split
from .codec import as_float_array

__all__ = ["IntTensor", "quantize", "dequantize", "round_half_even_div"]

_SPLITTER = 134217729.0  # 2^27 + 1: Veltkamp split of a float64 into two 26-bit halves


@dataclass
class IntTensor:
    codes: np.ndarray  # int8 (symmetric) or uint8 (asymmetric), x's shape
    scale: np.ndarray  # scale_dtype, layout per the module docstring
    zero_point: np.ndarray  # int32, same layout as scale
    bits: int
    symmetric: bool
    channel_axis: int | None
    group_size: int | None
    axis: int
    shape: tuple[int, ...]


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e == a * b exactly (Dekker), for finite float64 a, b."""
    p = a * b
    ca = _SPLITTER * a
    ah = ca - (ca - a)
    al = a - ah
    cb = _SPLITTER * b
    bh = cb - (cb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def _sign_of_x_minus_ks(x: np.ndarray, k: np.ndarray, s: np.ndarray) -> np.ndarray:
    """sign(x - k*s), exactly."""
    p, e = _two_product(k, s)
    d = x - p  # exact when x and p are within a factor 2; otherwise its sign is already right
    return np.sign(d - e)


def round_half_even_div(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """round(x / s), ties to even, decided exactly (float64 x and s > 0, finite)."""
    x = np.asarray(x, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.floor(x / s)
    k = np.where(np.isfinite(k), k, 0.0)
    k = np.where(_sign_of_x_minus_ks(x, k, s) < 0, k - 1, k)  # k*s <= x
    k = np.where(_sign_of_x_minus_ks(x, k + 1, s) >= 0, k + 1, k)  # x < (k+1)*s
    half = _sign_of_x_minus_ks(2 * x, 2 * k + 1, s)  # x vs (k + 1/2) s
    up = (half > 0) | ((half == 0) & (np.mod(k, 2) == 1))
    return k + up


def quantize(
    x: Any,
    bits: int,
    symmetric: bool = True,
    channel_axis: int | None = None,
    group_size: int | None = None,
    axis: int = -1,
    *,
    scale_dtype: Any = np.float32,
) -> IntTensor:
    """Quantize ``x`` to ``bits``-bit integers with float scales (module docstring)."""
    if not 2 <= bits <= 8:
        raise ValueError(f"bits must be 2..8, not {bits}")
    if channel_axis is not None and group_size is not None:
        raise ValueError("choose per-channel (channel_axis) or per-group (group_size), not both")
    sdt = np.dtype(scale_dtype)
    if sdt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"scale_dtype must be float16, float32 or float64, not {sdt}")
    arr, _ = as_float_array(x)
    x64 = arr.astype(np.float64)
    bad = ~np.isfinite(x64)
    if bad.any():
        raise ValueError(f"intq: x holds NaN or Inf (first at flat index {int(np.argmax(bad.reshape(-1)))})")
    b = split(x64, axis=axis, block=group_size, channel_axis=channel_axis, what="intq")
    data = b.data
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        amax = np.max(np.abs(data), axis=1) if data.shape[1] else np.zeros(data.shape[0])
        s = np.where(amax > 0, amax / qmax, 1.0).astype(sdt)
        if np.any(s == 0) or not np.all(np.isfinite(s)):
            raise ValueError(f"intq: a scale does not fit in {sdt} (underflow or overflow)")
        q = round_half_even_div(data, s.astype(np.float64)[:, None])
        codes = np.clip(q, -qmax, qmax).astype(np.int8)
        z = np.zeros(data.shape[0], dtype=np.int32)
    else:
        top = 2**bits - 1
        lo = np.minimum(data.min(axis=1), 0.0) if data.shape[1] else np.zeros(data.shape[0])
        hi = np.maximum(data.max(axis=1), 0.0) if data.shape[1] else np.zeros(data.shape[0])
        span = hi - lo
        s = np.where(span > 0, span / top, 1.0).astype(sdt)
        if np.any(s == 0) or not np.all(np.isfinite(s)):
            raise ValueError(f"intq: a scale does not fit in {sdt} (underflow or overflow)")
        s64 = s.astype(np.float64)
        z = np.clip(round_half_even_div(-lo, s64), 0, top).astype(np.int32)
        q = round_half_even_div(data, s64[:, None]) + z[:, None]
        codes = np.clip(q, 0, top).astype(np.uint8)
    return IntTensor(
        codes=merge(codes, b),
        scale=scales_to_layout(s, b),
        zero_point=scales_to_layout(z, b),
        bits=bits,
        symmetric=symmetric,
        channel_axis=b.axis if b.kind == "channel" else None,
        group_size=group_size,
        axis=b.axis,
        shape=arr.shape,
    )


def _blocks(q: IntTensor) -> Blocks:
    return split(q.codes, axis=q.axis, block=q.group_size, channel_axis=q.channel_axis, what="codes")


def dequantize(q: IntTensor, dtype: Any = np.float32) -> np.ndarray:
    """(code - zero_point) * scale, exact in float64, rounded once to ``dtype``."""
    b = _blocks(q)
    s = scales_from_layout(q.scale, b).astype(np.float64)
    z = scales_from_layout(q.zero_point, b).astype(np.float64)
    out = (b.data.astype(np.float64) - z[:, None]) * s[:, None]
    return merge(out, b).astype(dtype)
