"""Integer quantization with a float scale: per tensor, per channel or per group.

    symmetric   codes in -(2^(b-1)-1) .. 2^(b-1)-1, zero point 0,
                s = max|x| / (2^(b-1) - 1)
    asymmetric  codes in 0 .. 2^b - 1; the range [a, b] is first extended to hold 0
                (a = min(min x, 0), b = max(max x, 0)); s = (b - a) / (2^b - 1),
                z = clamp(round(-a / s), 0, 2^b - 1); code = clamp(round(x / s) + z)

for b in 2..8. A block whose values are all zero gets s = 1, z = 0. The scale is
computed in float64 and then stored in ``scale_dtype`` (float32 by default; float16
or float64 on request), rounded to nearest, except that a scale whose nearest is a nonzero
subnormal below it is rounded up, so the block's largest values still fit the code range (a
scale whose nearest is zero, or one that overflows, is an error), and the codes are rounded
against the *stored* scale, so
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

from .argcheck import flag, float_dtype, instance, integer, integer_array, optional_integer, round_to_dtype
from .arrays import as_numpy
from .block import Blocks, merge, scale_shape, scales_from_layout, scales_to_layout, split
from .codec import as_float_array
from .exactfloat import two_product

__all__ = ["IntTensor", "quantize", "dequantize", "round_half_even_div"]



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


def _store_scale(s64: np.ndarray, sdt: np.dtype) -> np.ndarray:
    """The float64 scales stored in ``sdt``: rounded to nearest, except that a scale stored as
    a nonzero subnormal is rounded up. A subnormal's relative step is coarse (float16 2^-24 for a wanted
    7.87e-8 is 24% low), so rounding it down would push the block's largest values far beyond
    the code range and clip them; rounded up, every value still fits."""
    with np.errstate(over="ignore"):  # an overflow to Inf is refused by the caller, without a warning
        s = s64.astype(sdt)
    tiny = np.finfo(sdt).tiny
    low = (s > 0) & (s < tiny) & (s.astype(np.float64) < s64)  # zero: an underflow, refused by the caller
    return np.where(low, np.nextafter(s, np.array(np.inf, sdt)), s).astype(sdt)


def _sign_of_x_minus_ks(x: np.ndarray, k: np.ndarray, s: np.ndarray) -> np.ndarray:
    """sign(x - k*s), exactly."""
    p, e = two_product(k, s)
    d = x - p  # exact when x and p are within a factor 2; otherwise its sign is already right
    return np.sign(d - e)


def _real(a: Any, name: str) -> np.ndarray:
    arr = as_numpy(a, name)
    if arr.dtype.kind in "iu":
        if arr.size and np.abs(arr.astype(np.float64)).max() > 2.0**53:
            raise ValueError(f"round_half_even_div: {name} holds an integer beyond 2^53")
        return arr.astype(np.float64)
    if arr.dtype.kind == "f" or arr.dtype.name == "bfloat16":
        if arr.dtype.itemsize > 8:
            raise TypeError(f"round_half_even_div: {name} is {arr.dtype}; pass float64 or narrower")
        return arr.astype(np.float64)
    raise TypeError(f"round_half_even_div: {name} must be a real array, not {arr.dtype}")


def round_half_even_div(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """round(x / s), ties to even, decided exactly, as float64.

    x and s: real arrays that broadcast together, exactly representable as float64
    (float16/bfloat16/float32/float64, or integers up to 2^53); x finite, s positive
    and finite. Anything else raises TypeError/ValueError."""
    x = _real(x, "x")
    s = _real(s, "s")
    try:
        np.broadcast_shapes(x.shape, s.shape)
    except ValueError:
        raise ValueError(f"round_half_even_div: x of shape {x.shape} and s of shape {s.shape} "
                         "do not broadcast") from None
    if not np.all(np.isfinite(x)):
        raise ValueError("round_half_even_div: x holds NaN or Inf")
    if not np.all(np.isfinite(s) & (s > 0)):
        raise ValueError("round_half_even_div: s must be positive and finite")
    # |x / s| beyond 2^53 has no exact integer neighbourhood in float64
    with np.errstate(over="ignore", under="ignore"):
        if x.size and s.size and np.any(np.abs(x) / s >= 2.0**52):
            raise ValueError("round_half_even_div: |x / s| must be below 2^52")
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
    """Quantize ``x`` to ``bits``-bit integers with float scales (module docstring).

    x: finite values as :func:`fmtsim.encode` accepts them. bits: an integer 2..8 (bool,
    float and str refused). symmetric: True or False. channel_axis, group_size, axis:
    integers or None (group_size >= 1; x's length along ``axis`` a multiple of it);
    channel_axis and group_size exclude each other. scale_dtype: float16, float32 or
    float64. Bad arguments raise TypeError or ValueError naming them.
    """
    bits = integer(bits, "bits", low=2, high=8)
    symmetric = flag(symmetric, "symmetric")
    channel_axis = optional_integer(channel_axis, "channel_axis")
    group_size = optional_integer(group_size, "group_size", low=1)
    axis = integer(axis, "axis")
    if channel_axis is not None and group_size is not None:
        raise ValueError("choose per-channel (channel_axis) or per-group (group_size), not both")
    sdt = float_dtype(scale_dtype, "scale_dtype")
    if sdt not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"scale_dtype must be float16, float32 or float64, not {sdt}")
    arr, _ = as_float_array(x)
    if arr.ndim == 0 and (channel_axis is not None or group_size is not None):
        raise ValueError("intq: x is 0-d, so it has no axis for channel_axis or group_size; quantize it per tensor")
    x64 = arr.astype(np.float64)
    bad = ~np.isfinite(x64)
    if bad.any():
        raise ValueError(f"intq: x holds NaN or Inf (first at flat index {int(np.argmax(bad.reshape(-1)))})")
    b = split(x64, axis=axis, block=group_size, channel_axis=channel_axis, what="intq", can_pad=False)
    data = b.data
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        amax = np.max(np.abs(data), axis=1) if data.shape[1] else np.zeros(data.shape[0])
        s = _store_scale(np.where(amax > 0, amax / qmax, 1.0), sdt)
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
        s = _store_scale(np.where(span > 0, span / top, 1.0), sdt)
        if np.any(s == 0) or not np.all(np.isfinite(s)):
            raise ValueError(f"intq: a scale does not fit in {sdt} (underflow or overflow)")
        s64 = s.astype(np.float64)
        z = np.clip(round_half_even_div(-lo, s64), 0, top).astype(np.int32)
        q = round_half_even_div(data, s64[:, None]) + z[:, None]
        codes = np.clip(q, 0, top).astype(np.uint8)
    return IntTensor(
        codes=merge(codes, b).reshape(arr.shape),
        scale=scales_to_layout(s, b),
        zero_point=scales_to_layout(z, b),
        bits=bits,
        symmetric=symmetric,
        channel_axis=b.axis if b.kind == "channel" else None,
        group_size=group_size,
        axis=b.axis,
        shape=arr.shape,
    )


def _blocks(q: IntTensor, what: str = "q") -> tuple[Blocks, np.ndarray, np.ndarray]:
    """Check that ``q`` is a consistent IntTensor: (blocks, scale per block, zero point per block)."""
    instance(q, IntTensor, what, "from intq.quantize")
    bits = integer(q.bits, f"{what}.bits", low=2, high=8)
    symmetric = flag(q.symmetric, f"{what}.symmetric")
    codes = integer_array(q.codes, f"{what}.codes")
    lo, hi = (-(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1) if symmetric else (0, 2**bits - 1)
    if codes.size:
        bad = (codes < lo) | (codes > hi)
        if bad.any():
            i = int(np.argmax(bad.reshape(-1)))
            raise ValueError(f"{what}.codes: {codes.reshape(-1)[i]} at flat index {i} is outside {lo}..{hi} "
                             f"({bits}-bit, {'symmetric' if symmetric else 'asymmetric'})")
    channel_axis = optional_integer(q.channel_axis, f"{what}.channel_axis")
    group_size = optional_integer(q.group_size, f"{what}.group_size", low=1)
    axis = integer(q.axis, f"{what}.axis")
    b = split(codes, axis=axis, block=group_size, channel_axis=channel_axis, what=f"{what}.codes", can_pad=False)
    scale = np.asarray(q.scale)
    zero = np.asarray(q.zero_point)
    for name, arr in (("scale", scale), ("zero_point", zero)):
        if arr.shape != scale_shape(b):
            raise ValueError(f"{what}.{name} has shape {arr.shape}; codes of shape {codes.shape} need {scale_shape(b)}")
    if scale.dtype not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"{what}.scale must be float16, float32 or float64, not {scale.dtype}")
    if scale.size and not np.all(np.isfinite(scale) & (scale > 0)):
        raise ValueError(f"{what}.scale must be positive and finite")
    integer_array(zero, f"{what}.zero_point")
    s = scales_from_layout(scale, b).astype(np.float64)
    z = scales_from_layout(zero, b).astype(np.float64)
    return b, s, z


def dequantize(q: IntTensor, dtype: Any = np.float32) -> np.ndarray:
    """(code - zero_point) * scale, exact in float64, rounded once to ``dtype`` (float16,
    bfloat16, float32 or float64). q: an IntTensor whose fields agree (codes within
    ``bits``, scale and zero point of the layout's shape, scales positive and finite)."""
    dt = float_dtype(dtype)
    b, s, z = _blocks(q)
    out = (b.data.astype(np.float64) - z[:, None]) * s[:, None]
    return round_to_dtype(merge(out, b).reshape(b.shape if np.ndim(q.codes) else ()), dt)
