"""NVIDIA NVFP4: E2M1 elements, UE4M3 block scales (16 elements, or 16x16 tiles for
weights), and one FP32 scale per tensor:  x ~= e2m1 * ue4m3 * global_scale.

``global_scale`` here is always the *decode multiplier* (amax / (448 * 6) when taken
from the tensor). Checkpoints disagree on what they store: NVIDIA ModelOpt stores
this multiplier (``weight_scale_2``), compressed-tensors stores its reciprocal, a
divisor (``weight_global_scale``); :func:`global_scale_to_stored` and
:func:`global_scale_from_stored` convert, naming the convention.

Two recipes reproduce real arithmetic, every step in float32 as the reference does:

``te`` (TransformerEngine custom_recipes/reference_nvfp4.py)::

    S   = min(2688 / amax, FLT_MAX); 1 if that is 0     (encode scale; 2688 = 448 * 6)
    G   = 1 / S                                          (global_scale)
    s_b = e4m3_rne(clamp(block_amax * (S * fl(1/6)), -448, 448))
    m_b = min(1 / (s_b * G), FLT_MAX)
    q   = e2m1_rne(clamp(x * m_b, -6, 6)), a -0.0 product written as code 0 (the
          reference cast's intervals put -0.0 with +0; -0.1 still gives 0x8)

``torchao`` (torchao 0.18, prototype/mx_formats/nvfp4_tensor.py ``nvfp4_quantize``)::

    G   = amax / 2688                                    (per_tensor_scale)
    s_b = e4m3_rne(clamp((block_amax / 6) / G, 2^-6, 448))   (never subnormal)
    r_b = (1 / G) / s_b                                  (reciprocal, then multiply:
    q   = e2m1_rne(clamp(x * r_b, -6, 6))                 torchao matches its Triton kernel)

Older torchao releases divided, x / (G * s_b); the two differ on boundary inputs.

They agree on normal-range blocks and part on small ones: global amax 1000 and block
amax 0.01 give scale 0x02 under te and 0x08 under torchao (docs/rules.md §4).

amax = 0: te gives S = FLT_MAX, scales 0x00, codes 0 and G = 1/FLT_MAX; torchao gives
G = 0 and NaN scales, so the tensor decodes to NaN. fmtsim writes those scales as 0x7F and
the codes as 0; torchao's bytes there come from 0/0 and depend on the CPU's default NaN
(x86: scales 0xFF, codes 0xC), a named divergence (conformance.divergences).
NaN or Inf in x: ValueError naming the first index (E2M1 cannot carry them and the
tensor scale would not be finite). Stochastic rounding (``rounding='sr'`` with
``rbits``) applies to the elements, as used for gradients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .block import block_amax, merge, scales_from_layout, scales_to_layout, split
from .codec import as_float_array, decode, encode

__all__ = ["NVFP4Tensor", "quantize", "dequantize", "RECIPES", "global_scale_to_stored",
           "global_scale_from_stored"]

RECIPES = ("te", "torchao")
F32 = np.float32
FLT_MAX = np.finfo(np.float32).max
UE4M3_NAN = 0x7F


@dataclass
class NVFP4Tensor:
    """codes: E2M1 codes (uint8, unpacked) in x's layout; scales: UE4M3 codes, x's shape
    with the last axis divided by 16 (16x16 tiles: repeated for the tile's 16 rows);
    global_scale: float32 decode multiplier."""

    codes: np.ndarray
    scales: np.ndarray
    global_scale: np.float32
    tile: tuple[int, int]
    recipe: str
    shape: tuple[int, ...]


def _check_finite(x: np.ndarray) -> None:
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise ValueError(f"nvfp4: x holds NaN or Inf (first at flat index {i}); NVFP4 cannot encode them")


def _e4m3_value(v: np.ndarray) -> np.ndarray:
    """float32 -> E4M3 (RNE, satfinite) code and its float32 value."""
    return np.asarray(encode(v.astype(F32), "e4m3"))


def quantize(
    x: Any,
    *,
    tile: tuple[int, int] = (1, 16),
    recipe: str = "te",
    global_scale: float | None = None,
    rounding: str = "rne",
    rbits: Any = None,
) -> NVFP4Tensor:
    """NVFP4-quantize ``x`` along its last axis; see the module docstring."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown NVFP4 recipe {recipe!r}; choose from {', '.join(RECIPES)}")
    if tuple(tile) not in ((1, 16), (16, 16)):
        raise ValueError(f"NVFP4 tiles are (1, 16) or (16, 16), not {tile}")
    arr, _ = as_float_array(x)
    x32 = arr.astype(F32)
    _check_finite(x32)
    rows = tile[0]
    b = split(x32, axis=-1, block=16, rows=rows, what="nvfp4")
    bmax = block_amax(b.data).astype(F32)
    amax = F32(np.max(np.abs(x32))) if x32.size else F32(0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if recipe == "te":
            if global_scale is None:
                enc = F32(min(F32(2688.0) / amax, FLT_MAX)) if amax > 0 else FLT_MAX
                enc = F32(1.0) if enc == 0 else enc
                g = F32(F32(1.0) / enc)
            else:
                g = F32(global_scale)
                enc = F32(F32(1.0) / g)
            mult = F32(enc * F32(F32(1.0) / F32(6.0)))
            s = np.minimum((bmax * mult).astype(F32), FLT_MAX)
            s = np.clip(s, -448, 448).astype(F32)
            s_codes = _e4m3_value(s)
            s_val = decode(s_codes, "e4m3", np.float32)
            m_b = np.minimum((F32(1.0) / (s_val * g).astype(F32)).astype(F32), FLT_MAX).astype(F32)
            scaled = (b.data * m_b[:, None]).astype(F32)
        else:
            g = F32(amax / F32(2688.0)) if global_scale is None else F32(global_scale)
            s = ((bmax / F32(6.0)).astype(F32) / g).astype(F32)
            s = np.clip(s, F32(2.0**-6), F32(448.0)).astype(F32)  # NaN (amax 0) stays NaN
            s_codes = np.where(np.isnan(s), UE4M3_NAN, _e4m3_value(np.nan_to_num(s))).astype(np.uint8)
            s_val = decode(s_codes, "e4m3", np.float32)
            recip = ((F32(1.0) / g) / s_val).astype(F32)
            scaled = (b.data * recip[:, None]).astype(F32)
    scaled = np.clip(scaled, F32(-6.0), F32(6.0))
    nan_el = np.isnan(scaled)
    r = None
    if rbits is not None:
        r = split(np.asarray(rbits), axis=-1, block=16, rows=rows, what="rbits").data
    codes = np.asarray(encode(np.where(nan_el, F32(0), scaled), "e2m1", rounding=rounding, rbits=r,
                              nan="te" if recipe == "te" else "zero"))
    codes = codes.reshape(b.data.shape)
    return NVFP4Tensor(merge(codes.astype(np.uint8), b), scales_to_layout(s_codes.astype(np.uint8), b),
                       F32(g), (rows, 16), recipe, arr.shape)


def dequantize(q: NVFP4Tensor, dtype: Any = np.float32) -> np.ndarray:
    """e2m1 * ue4m3 * global_scale, exact in float64, rounded once to ``dtype``."""
    b = split(q.codes, axis=-1, block=16, rows=q.tile[0], what="codes")
    el = decode(b.data, "e2m1", np.float64)
    sc = decode(scales_from_layout(q.scales, b), "ue4m3", np.float64)
    out = el * sc[:, None] * np.float64(q.global_scale)
    return merge(out, b).astype(dtype)


def global_scale_to_stored(global_scale: float, convention: str) -> np.float32:
    """What a checkpoint stores: 'multiplier' (ModelOpt weight_scale_2 = amax/2688) or
    'divisor' (compressed-tensors weight_global_scale = 2688/amax), as float32."""
    g = F32(global_scale)
    if convention == "multiplier":
        return g
    if convention == "divisor":
        return F32(F32(1.0) / g)
    raise ValueError("convention must be 'multiplier' or 'divisor'")


def global_scale_from_stored(stored: float, convention: str) -> np.float32:
    """The decode multiplier from a stored value of the named convention."""
    return global_scale_to_stored(stored, convention)  # the reciprocal is its own inverse
