"""Coverage models: named, deterministic generators of test inputs.

Each model yields arrays of one source dtype aimed at the places where
conversions go wrong: every code, every rounding boundary, every 16-bit
pattern, random patterns with a fixed seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import ml_dtypes
import numpy as np

from ..formats import Format, get_format
from ..rounding import magnitude_keys
from ..sources import SOURCE_TYPES

__all__ = ["boundary_points", "all_16bit", "random_float32", "SOURCE_DTYPES", "float64_extent"]

SOURCE_DTYPES = {name: st.dtype for name, st in SOURCE_TYPES.items()}


def float64_extent(f: Format) -> tuple[float, float, float]:
    """(smallest positive, smallest normal, largest finite) value of ``f`` as float64s: the
    format's own where they are float64s, else the nearest of its values that are (Binary16p1se's
    run from 2^-16383 to 2^16382: 2^-1074 and 2^1023 here)."""
    keys, exact = magnitude_keys(f)
    vals = np.unique(keys[exact & np.isfinite(keys) & (keys > 0) & ~f.parts.negative])
    normal = float(f.min_normal) if f.min_normal is not None and f.fits_float64 else float(vals[0])
    return float(vals[0]), normal, float(vals[-1])


def _step_past_max(f: Format, top: float) -> float:
    if f.kind == "int":
        return 2.0**f.scale_exp
    return 2.0 ** (math.floor(math.log2(top)) - f.man_bits)


def _next_up(p: np.ndarray, dtype: np.dtype, direction: int) -> np.ndarray:
    if dtype == SOURCE_DTYPES["bfloat16"]:
        bits = p.view(np.uint16).astype(np.int32) + direction
        return bits.astype(np.uint16).view(dtype)
    return np.nextafter(p, np.array(direction * np.inf, dtype=dtype))


def boundary_points(fmt: str | Format, dtype: np.dtype | type) -> np.ndarray:
    """Every code's magnitude, every midpoint between neighbours (the overflow tie
    included), each +-1 ulp of ``dtype``, both signs, +-0, +-Inf and +-NaN; as ``dtype``.
    Points not representable in ``dtype`` are rounded into it (and then still sit
    next to the boundary)."""
    f = get_format(fmt)
    dt = np.dtype(dtype)
    keys, exact = magnitude_keys(f)
    vals = np.unique(keys[exact & np.isfinite(keys)])  # every magnitude that is a float64 (all, but for
    top = vals[-1]                                      # the formats whose values go beyond float64)
    ext = np.append(vals, top + _step_past_max(f, top)) if f.fits_float64 else vals
    with np.errstate(over="ignore"):  # past float64's max: Inf, dropped below
        mids = ext[:-1] + (ext[1:] - ext[:-1]) / 2
        pts = np.concatenate([ext, mids, [0.0, ext[0] / 2, ext[0] / 4, 2 * ext[-1], 4 * ext[-1]]])
    with np.errstate(over="ignore"):
        p = pts.astype(dt)
    p = p[np.isfinite(p)]
    p = p[p >= 0]
    with np.errstate(over="ignore"):  # one ulp past the type's max is Inf, dropped below
        around = np.concatenate([p, _next_up(p, dt, 1), _next_up(p[p > 0], dt, -1)])
    with np.errstate(invalid="ignore"):
        wide = around.astype(np.float64)
    around = around[np.isfinite(wide) & (wide >= 0)]
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]).astype(dt)
    out = np.concatenate([around, -around, specials]).astype(dt)
    _, first = np.unique(out.view(f"u{dt.itemsize}"), return_index=True)
    return out[np.sort(first)]


def all_16bit(dtype: np.dtype | type) -> np.ndarray:
    """Every float16 or bfloat16 bit pattern, NaNs included."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.dtype(dtype))


def random_float32(n: int, seed: int = 20261129) -> np.ndarray:
    """``n`` uniformly random float32 bit patterns (NaNs and Infs included)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def iter_models(fmt: str | Format, big: bool = True) -> Iterator[tuple[str, str, np.ndarray]]:
    """(model name, source dtype name, inputs) for the encode coverage models."""
    for src, dt in SOURCE_DTYPES.items():
        yield "encode_ties", src, boundary_points(fmt, dt)
    if big:
        yield "encode_all16", "float16", all_16bit(np.float16)
        yield "encode_all16", "bfloat16", all_16bit(ml_dtypes.bfloat16)
        yield "encode_random", "float32", random_float32(1 << 18)
