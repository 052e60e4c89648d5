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
(x86: scales 0xFF, codes 0xC), a named divergence of torchao (conformance.impls.torchao).
NaN or Inf in x: ValueError naming the first index (E2M1 cannot carry them and the
tensor scale would not be finite). Stochastic rounding (``rounding='sr'`` with
``rbits``) applies to the elements, as used for gradients.

Two engines give the same bits (tests/test_nvfp4_compiled.py): the numpy steps below and a
C++ kernel (``mx_blocks.cpp``, shared with :mod:`fmtsim.mx`, built on first use by
:mod:`fmtsim.native`) that runs the same float32 steps in the same order on each block, with
the same encode tables; ``engine="auto"`` (the default) uses it for every rounding but
``sr`` where it builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .argcheck import choice, float_dtype, instance, integer, integer_array, round_to_dtype, rounding_name, where
from .arrays import as_numpy
from .block import block_amax, merge, scale_shape, scales_from_layout, scales_to_layout, split
from .codec import _decode_table, as_float_array, decode, encode
from .formats import get_format
from .mx import _LIBRARY  # the block quantizers' C++ kernel (mx_blocks.cpp), shared with mx
from .policy import Policy, Resolved, resolve
from .rounding import table_f32

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


def _scalar(value: Any, name: str) -> np.float32:
    """One real number (Python or numpy scalar, or an array holding one value) as float32."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    try:
        a = as_numpy(value, name)
    except Exception:
        raise TypeError(f"{name} must be a number, not {type(value).__name__}") from None
    if a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16":
        raise TypeError(f"{name} must be a real number, not {a.dtype}")
    if a.size != 1:
        raise ValueError(f"{name} must be one number (a scalar or a one-element array), not shape {a.shape}")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return F32(a.reshape(-1)[0])


def _tile(tile: Any) -> tuple[int, int]:
    if not isinstance(tile, (tuple, list)) or len(tile) != 2:
        raise TypeError(f"tile must be a pair (1, 16) or (16, 16), not {tile!r}")
    t = (integer(tile[0], "tile[0]"), integer(tile[1], "tile[1]"))
    if t not in ((1, 16), (16, 16)):
        raise ValueError(f"NVFP4 tiles are (1, 16) or (16, 16), not {tile}")
    return t


def _finite_amax(x: np.ndarray) -> np.float32:
    """max |x| of float32 ``x`` (0 when empty) as max(max x, -min x): two reductions and no
    temporary; ValueError when x holds NaN or Inf (a NaN makes both reductions NaN)."""
    if not x.size:
        return F32(0)
    hi, lo = x.max(), x.min()
    if not (np.isfinite(hi) and np.isfinite(lo)):
        i = int(np.argmax(~np.isfinite(x.reshape(-1))))
        raise ValueError(f"nvfp4: x holds NaN or Inf, or a value beyond float32's range (first at flat index "
                         f"{i}); NVFP4 cannot encode them")
    return F32(max(hi, -lo))


def _e4m3_value(v: np.ndarray) -> np.ndarray:
    """float32 -> E4M3 (RNE, satfinite) code and its float32 value."""
    return np.asarray(encode(v.astype(F32), "e4m3"))


def _tensor_scale(recipe: str, amax: np.float32, global_scale: float | None
                  ) -> tuple[np.float32, np.float32, np.float32]:
    """(G, te's block multiplier S * fl(1/6), torchao's fl(1/G)), each a float32 step of the
    recipe (see the module docstring); G from amax unless ``global_scale`` is given."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if recipe == "te":
            if global_scale is None:
                enc = F32(min(F32(2688.0) / amax, FLT_MAX)) if amax > 0 else FLT_MAX
                enc = F32(1.0) if enc == 0 else enc
                g = F32(F32(1.0) / enc)
            else:
                g = F32(global_scale)
                enc = F32(F32(1.0) / g)
            return g, F32(enc * F32(F32(1.0) / F32(6.0))), F32(F32(1.0) / g)
        g = F32(amax / F32(2688.0)) if global_scale is None else F32(global_scale)
        return g, F32(0.0), F32(F32(1.0) / g)


# TransformerEngine's reference FP4 cast writes an exact -0.0 as +0 (torchao keeps -0); NaN
# elements are written as 0 by both recipes, before the cast
_TE_ELEMENTS = Policy(neg_zero_input="positive")


def _element_policy(recipe: str, rounding: str | None) -> Resolved:
    """The E2M1 element rule of ``recipe``."""
    return resolve("e2m1", rounding, None, "zero", profile=_TE_ELEMENTS if recipe == "te" else None)


def _quantize_compiled(data: np.ndarray, recipe: str, mult: np.float32, g: np.float32, inv_g: np.float32,
                       rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """(E2M1 codes, UE4M3 codes) of float32 blocks (rows of ``data``) by the C++ kernel: the
    numpy steps of :func:`quantize` in one pass per block."""
    data = np.ascontiguousarray(data, F32)
    s_table, s_shift = table_f32(resolve("e4m3", None, None, None).for_source("float32"))
    e_pol = _element_policy(recipe, rounding).for_source("float32")
    e_table, e_shift = table_f32(e_pol)
    assert e_pol.via.type is None and e_pol.on_nan.signaling is None  # what encode's table path needs
    s_values = np.ascontiguousarray(_decode_table(get_format("e4m3"), np.dtype(F32)))
    codes = np.empty(data.shape, np.uint8)
    scales = np.empty(data.shape[0], np.uint8)
    _LIBRARY.entry()["nvfp4"](data.shape[0], data.shape[1], data.ctypes.data, int(recipe == "torchao"), float(mult),
                     float(g), float(inv_g), s_table.ctypes.data, s_shift, s_values.ctypes.data,
                     e_table.ctypes.data, e_shift, codes.ctypes.data, scales.ctypes.data)
    return codes, scales


def quantize(
    x: Any,
    *,
    tile: tuple[int, int] = (1, 16),
    recipe: str = "te",
    global_scale: float | None = None,
    rounding: str = "rne",
    rbits: Any = None,
    engine: str = "auto",
) -> NVFP4Tensor:
    """NVFP4-quantize ``x`` along its last axis; see the module docstring.

    x: finite float16, bfloat16, float32 or float64 values (rounded to float32 first, as
    the references do), the last axis a multiple of 16; with 16x16 tiles at least 2-D
    with the second-to-last axis a multiple of 16.
    tile: (1, 16) or (16, 16). recipe: 'te' or 'torchao'.
    global_scale: None (taken from the tensor) or the decode multiplier to use: one
    positive, finite number (a scalar or a one-element array), kept as float32 (round
    to nearest), whose float32 reciprocal is finite (so at least about 2.9e-39).
    rounding: an fmtsim rounding mode for the elements; 'sr' needs ``rbits`` of x's shape.
    engine: 'auto' (the default: a C++ kernel, built on first use, runs the same float32
    steps in one pass per block, for every rounding but 'sr'), 'compiled' (requires it) or
    'numpy'; the same bits either way (tests/test_nvfp4_compiled.py).
    Bad arguments raise TypeError or ValueError naming them.
    """
    recipe = choice(recipe, "recipe", RECIPES)
    engine = _LIBRARY.check_engine(engine, "nvfp4.quantize")
    tile = _tile(tile)
    rounding_name(rounding)
    if global_scale is not None:
        gs = _scalar(global_scale, "global_scale")
        if not np.isfinite(gs) or gs <= 0:
            raise ValueError(f"global_scale must be positive and finite, not {float(gs)!r} (as float32)")
        with np.errstate(over="ignore", divide="ignore"):
            if not np.isfinite(F32(1.0) / gs):
                raise ValueError(f"global_scale {float(gs)!r} is too small: its float32 reciprocal overflows")
        global_scale = float(gs)
    arr, _ = as_float_array(x)
    with np.errstate(over="ignore"):
        x32 = arr.astype(F32, copy=False)
    amax = _finite_amax(x32)
    rows = tile[0]
    if x32.ndim == 0 or x32.shape[-1] % 16:
        n = x32.shape[-1] if x32.ndim else 1
        raise ValueError(f"nvfp4: the last axis of x has length {n}, not a multiple of the block size 16")
    if rows > 1 and (x32.ndim < 2 or x32.shape[-2] % rows):
        raise ValueError(f"nvfp4: 16x16 tiles need x of 2 or more dimensions with the second-to-last a multiple "
                         f"of 16; x has shape {x32.shape}")
    if rbits is not None:
        ra = integer_array(rbits, "rbits")
        if ra.shape != arr.shape:
            raise ValueError(f"rbits has shape {ra.shape}; it needs one value per element of x, shape {arr.shape}")
        if ra.dtype.kind == "i" and ra.size and ra.min() < 0:
            i = int(np.argmax(ra.reshape(-1) < 0))
            raise ValueError(f"rbits must be non-negative; {where(ra.shape, i)} holds {ra.reshape(-1)[i]}")
    b = split(x32, axis=-1, block=16, rows=rows, what="nvfp4", can_pad=False)
    e_pol = _element_policy(recipe, rounding)
    compiled = e_pol.rounding != "sr" and rbits is None  # (rbits without 'sr': the encode below refuses them)
    if engine == "compiled" and not compiled:
        raise ValueError(f"nvfp4.quantize: engine='compiled' takes every rounding but 'sr' (rounding is "
                         f"{e_pol.rounding!r}{', with rbits' if rbits is not None else ''}); use engine='auto' or "
                         "'numpy'")
    compiled = compiled and _LIBRARY.used(engine)
    g, mult, inv_g = _tensor_scale(recipe, amax, global_scale)
    if compiled:
        codes, s_codes = _quantize_compiled(b.data, recipe, mult, g, inv_g, rounding)
        return NVFP4Tensor(merge(codes, b), scales_to_layout(s_codes, b), g, (rows, 16), recipe, arr.shape)
    bmax = block_amax(b.data).astype(F32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if recipe == "te":
            s = np.minimum((bmax * mult).astype(F32), FLT_MAX)
            s = np.clip(s, -448, 448).astype(F32)
            s_codes = _e4m3_value(s)
            s_val = decode(s_codes, "e4m3", np.float32)
            m_b = np.minimum((F32(1.0) / (s_val * g).astype(F32)).astype(F32), FLT_MAX).astype(F32)
            scaled = (b.data * m_b[:, None]).astype(F32)
        else:
            s = ((bmax / F32(6.0)).astype(F32) / g).astype(F32)
            s = np.clip(s, F32(2.0**-6), F32(448.0)).astype(F32)  # NaN (amax 0) stays NaN
            s_codes = np.where(np.isnan(s), UE4M3_NAN, _e4m3_value(np.nan_to_num(s))).astype(np.uint8)
            s_val = decode(s_codes, "e4m3", np.float32)
            recip = (inv_g / s_val).astype(F32)
            scaled = (b.data * recip[:, None]).astype(F32)
    scaled = np.clip(scaled, F32(-6.0), F32(6.0))
    nan_el = np.isnan(scaled)
    r = None
    if rbits is not None:
        r = split(as_numpy(rbits, "rbits"), axis=-1, block=16, rows=rows, what="rbits", can_pad=False).data
    codes = np.asarray(encode(np.where(nan_el, F32(0), scaled), "e2m1", rounding=rounding, rbits=r, nan="zero",
                              profile=_TE_ELEMENTS if recipe == "te" else None))
    codes = codes.reshape(b.data.shape)
    return NVFP4Tensor(merge(codes.astype(np.uint8), b), scales_to_layout(s_codes.astype(np.uint8), b),
                       F32(g), (rows, 16), recipe, arr.shape)


def _blocks_of(q: NVFP4Tensor, what: str = "q") -> Any:
    instance(q, NVFP4Tensor, what, "from nvfp4.quantize")
    tile = _tile(q.tile)
    codes = integer_array(q.codes, f"{what}.codes", bits=4)
    if codes.ndim == 0 or codes.shape[-1] % 16 or (tile[0] > 1 and (codes.ndim < 2 or codes.shape[-2] % 16)):
        raise ValueError(f"{what}.codes has shape {codes.shape}; {tile[0]}x16 tiles need the last axis "
                         + ("and the one before it " if tile[0] > 1 else "") + "to be multiples of 16")
    b = split(codes, axis=-1, block=16, rows=tile[0], what=f"{what}.codes", can_pad=False)
    scales = integer_array(q.scales, f"{what}.scales", bits=7)
    if scales.shape != scale_shape(b):
        raise ValueError(f"{what}.scales has shape {scales.shape}; codes of shape {codes.shape} in {tile[0]}x16 "
                         f"tiles need {scale_shape(b)}")
    g = _scalar(q.global_scale, f"{what}.global_scale")
    if not np.isfinite(g) or g < 0:
        raise ValueError(f"{what}.global_scale must be finite and not negative, not {float(g)!r}")
    return b, scales, g


def dequantize(q: NVFP4Tensor, dtype: Any = np.float32) -> np.ndarray:
    """e2m1 * ue4m3 * global_scale, exact in float64, rounded once to ``dtype``
    (float16, bfloat16, float32 or float64).

    q: an NVFP4Tensor whose fields agree (4-bit codes, 7-bit scales of the layout's
    shape, 16x16 tiles' scales repeated on their rows, a finite global scale >= 0);
    otherwise TypeError/ValueError naming the field."""
    dt = float_dtype(dtype)
    b, scales, g = _blocks_of(q)
    el = decode(b.data, "e2m1", np.float64)
    sc = decode(scales_from_layout(scales, b), "ue4m3", np.float64)
    with np.errstate(invalid="ignore"):
        out = el * sc[:, None] * np.float64(g)
    return round_to_dtype(merge(out, b), dt)


def global_scale_to_stored(global_scale: float, convention: str) -> np.float32:
    """What a checkpoint stores: 'multiplier' (ModelOpt weight_scale_2 = amax/2688) or
    'divisor' (compressed-tensors weight_global_scale = 2688/amax), as float32.

    global_scale: one finite number (scalar or one-element array): >= 0 for
    'multiplier' (torchao gives an all-zero tensor the multiplier 0), > 0 with a finite
    float32 reciprocal for 'divisor'; anything else raises TypeError/ValueError."""
    return _convert(global_scale, convention, "global_scale")


def global_scale_from_stored(stored: float, convention: str) -> np.float32:
    """The decode multiplier from a stored value of the named convention (the same
    checks as :func:`global_scale_to_stored`)."""
    return _convert(stored, convention, "stored")  # the reciprocal is its own inverse


def _convert(value: Any, convention: str, name: str) -> np.float32:
    convention = choice(convention, "convention", ("multiplier", "divisor"))
    g = _scalar(value, name)
    if not np.isfinite(g) or g < 0 or (g == 0 and convention == "divisor"):
        need = "positive" if convention == "divisor" else "non-negative"
        raise ValueError(f"{name} must be {need} and finite for the {convention!r} convention, not "
                         f"{float(g)!r} (as float32)")
    if convention == "multiplier":
        return g
    with np.errstate(over="ignore"):
        r = F32(F32(1.0) / g)
    if not np.isfinite(r):
        raise ValueError(f"{name} {float(g)!r} has no float32 reciprocal (it overflows)")
    return r
