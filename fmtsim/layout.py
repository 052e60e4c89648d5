"""Bytes in memory: FP4 and FP6 packing, the cuBLAS/CUTLASS 128x4 block-scale
swizzle, and gpt-oss MXFP4 tensors.

FP4, two codes per byte along the last axis (ONNX, PyTorch, torchao, gpt-oss)::

    order="low_first" (default)   byte i = code[2i] | code[2i+1] << 4
    order="high_first"            byte i = code[2i] << 4 | code[2i+1]

FP6: ``pack_fp6(..., dense=False)`` keeps one code per byte (PTX, torchao: the two
top bits zero). ``dense=True`` packs four codes into three bytes, least significant
bits first::

    24-bit word  w = c0 | c1 << 6 | c2 << 12 | c3 << 18
    bytes        b0 = w[7:0]   b1 = w[15:8]   b2 = w[23:16]

           b2                b1                b0
    | c3 (6) | c2 hi 2 | c2 lo 4 | c1 hi 4 | c1 lo 2 | c0 (6) |

Scale swizzle (cuBLAS VEC16_UE4M3 / VEC32_UE8M0, CUTLASS sm100 block-scaled
layout): the (rows, cols) scale matrix is zero-padded to rows % 128 == 0 and
cols % 4 == 0 and cut into 128x4 tiles of 512 contiguous bytes, tiles in
row-block-major order (tile = row_block * n_col_blocks + col_block); inside a
tile, scale (r, c) sits at byte (r % 32) * 16 + (r // 32) * 4 + c.

Odd or non-multiple lengths are errors naming the length unless ``pad=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .argcheck import choice, flag, integer, optional_integer
from .arrays import as_numpy
from .mx import MXTensor, check_tensor

__all__ = ["pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6", "swizzle_scales", "unswizzle_scales",
           "unswizzle_order", "to_gpt_oss", "from_gpt_oss"]


def _codes(codes: Any, bits: int, what: str) -> np.ndarray:
    c = as_numpy(codes, "codes")
    if c.dtype.kind not in "iu":
        raise TypeError(f"{what}: codes must be integers, not {c.dtype}")
    if c.ndim == 0:
        raise ValueError(f"{what}: a 0-d input has no last axis to pack along; pass an array of at least one axis")
    if c.size and (c.min() < 0 or c.max() >= 1 << bits):
        bad = int(np.argmax((c.reshape(-1) < 0) | (c.reshape(-1) >= 1 << bits)))
        raise ValueError(f"{what}: code {c.reshape(-1)[bad]} at flat index {bad} does not fit in {bits} bits")
    return c.astype(np.uint8)


def _pad_last(c: np.ndarray, multiple: int, pad: bool, what: str) -> np.ndarray:
    n = c.shape[-1]
    if n % multiple:
        if not pad:
            raise ValueError(f"{what}: last axis has length {n}, not a multiple of {multiple}; pass pad=True")
        c = np.pad(c, [(0, 0)] * (c.ndim - 1) + [(0, multiple - n % multiple)])
    return c


def _length(length: Any, n: int, most_padding: int, what: str) -> int | None:
    """``length`` codes kept of the ``n`` unpacked: None (all) or n - most_padding .. n."""
    v = optional_integer(length, f"{what}: length")
    if v is not None and not max(0, n - most_padding) <= v <= n:
        raise ValueError(f"{what}: length {v} is impossible for {n} unpacked codes; it must be "
                         f"{max(0, n - most_padding)}..{n} (only the packing's padding can be dropped)")
    return v


def pack_fp4(codes: Any, *, order: str = "low_first", pad: bool = False) -> np.ndarray:
    """Two 4-bit codes per byte along the last axis (see the module docstring).

    codes: an integer array of at least one axis, values 0..15. order: 'low_first' or
    'high_first'. pad: True appends a zero code to an odd last axis (else ValueError)."""
    order = choice(order, "order", ("low_first", "high_first"))
    pad = flag(pad, "pad")
    c = _pad_last(_codes(codes, 4, "pack_fp4"), 2, pad, "pack_fp4")
    first, second = c[..., 0::2], c[..., 1::2]
    if order == "low_first":
        return (first | (second << 4)).astype(np.uint8)
    return ((first << 4) | second).astype(np.uint8)


def unpack_fp4(packed: Any, *, order: str = "low_first", length: int | None = None) -> np.ndarray:
    """Inverse of :func:`pack_fp4`: packed bytes (integers 0..255, at least one axis)
    -> codes, two per byte. ``length`` drops the padding code: None or 2n - 1 .. 2n for
    n bytes along the last axis; anything else raises ValueError."""
    order = choice(order, "order", ("low_first", "high_first"))
    p = _codes(packed, 8, "unpack_fp4")
    length = _length(length, 2 * p.shape[-1], 1, "unpack_fp4")
    lo, hi = p & 0xF, p >> 4
    pair = (lo, hi) if order == "low_first" else (hi, lo)
    out = np.stack(pair, axis=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)
    return out if length is None else out[..., :length]


def pack_fp6(codes: Any, *, dense: bool = True, pad: bool = False) -> np.ndarray:
    """FP6 codes: one per byte (``dense=False``) or four in three bytes (docstring).

    codes: an integer array of at least one axis, values 0..63. dense, pad: True or
    False; pad appends zero codes to a last axis that is not a multiple of 4."""
    dense = flag(dense, "dense")
    pad = flag(pad, "pad")
    c = _codes(codes, 6, "pack_fp6")
    if not dense:
        return c.copy()
    c = _pad_last(c, 4, pad, "pack_fp6").astype(np.uint32)
    q = c.reshape(*c.shape[:-1], -1, 4)
    w = q[..., 0] | (q[..., 1] << 6) | (q[..., 2] << 12) | (q[..., 3] << 18)
    out = np.stack([w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF], axis=-1)
    return out.reshape(*c.shape[:-1], -1).astype(np.uint8)


def unpack_fp6(packed: Any, *, dense: bool = True, length: int | None = None) -> np.ndarray:
    """Inverse of :func:`pack_fp6`: bytes (integers 0..255, at least one axis) -> codes.
    ``length`` drops padding codes: None or 4n/3 - 3 .. 4n/3 for n dense bytes (n for
    one per byte, which has no padding); anything else raises ValueError."""
    dense = flag(dense, "dense")
    p = _codes(packed, 8, "unpack_fp6")
    if not dense:
        if p.size and p.max() >= 64:
            bad = int(np.argmax(p.reshape(-1) >= 64))
            raise ValueError(f"unpack_fp6: one-per-byte FP6 codes must have their top two bits clear; flat index "
                             f"{bad} holds {p.reshape(-1)[bad]:#04x}")
        _length(length, p.shape[-1], 0, "unpack_fp6")
        return p.copy()
    if p.shape[-1] % 3:
        raise ValueError(f"unpack_fp6: last axis has length {p.shape[-1]}, not a multiple of 3")
    length = _length(length, p.shape[-1] // 3 * 4, 3, "unpack_fp6")
    t = p.astype(np.uint32).reshape(*p.shape[:-1], -1, 3)
    w = t[..., 0] | (t[..., 1] << 8) | (t[..., 2] << 16)
    out = np.stack([(w >> s) & 0x3F for s in (0, 6, 12, 18)], axis=-1).reshape(*p.shape[:-1], -1)
    out = out.astype(np.uint8)
    return out if length is None else out[..., :length]


def _check_bytes(s: np.ndarray, what: str) -> None:
    """ValueError unless every value is a byte (0..255): the swizzle lays out scale bytes."""
    if s.size and (s.min() < 0 or s.max() > 255):
        flat = s.reshape(-1)
        i = int(np.argmax((flat < 0) | (flat > 255)))
        raise ValueError(f"{what}: {int(flat[i])} at flat index {i} is not a scale byte (0..255)")


def swizzle_scales(scales: Any) -> np.ndarray:
    """(rows, cols) scale bytes -> the padded, swizzled 1-D byte array kernels read.

    scales: a 2-D integer array of values 0..255 (any integer dtype, kept; the padding is
    zeros of it)."""
    s = as_numpy(scales, "scales")
    if s.dtype.kind not in "iu":
        raise TypeError(f"swizzle_scales: scales must be integers (scale codes), not {s.dtype}")
    if s.ndim != 2:
        raise ValueError(f"swizzle_scales: expected a 2-D (rows, cols) scale matrix, got shape {s.shape}")
    _check_bytes(s, "swizzle_scales: scales")
    rows, cols = s.shape
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    padded = np.zeros((rp, cp), dtype=s.dtype)
    padded[:rows, :cols] = s
    # r = row_block*128 + (r // 32 within tile)*32 + r % 32 ; c = col_block*4 + c
    t = padded.reshape(rp // 128, 4, 32, cp // 4, 4)
    t = t.transpose(0, 3, 2, 1, 4)  # (row_block, col_block, r % 32, r // 32, c)
    return np.ascontiguousarray(t).reshape(-1)


def unswizzle_scales(swizzled: Any, rows: int, cols: int) -> np.ndarray:
    """Inverse of :func:`swizzle_scales`: the (rows, cols) matrix, padding dropped.

    swizzled: integers, exactly the padded size; rows, cols: non-negative integers."""
    rows = integer(rows, "rows", low=0)
    cols = integer(cols, "cols", low=0)
    s = as_numpy(swizzled, "swizzled").reshape(-1)
    if s.dtype.kind not in "iu":
        raise TypeError(f"unswizzle_scales: swizzled must be integers (scale codes), not {s.dtype}")
    _check_bytes(s, "unswizzle_scales: swizzled")
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    if s.size != rp * cp:
        raise ValueError(f"unswizzle_scales: {s.size} bytes; a {rows}x{cols} matrix swizzles to {rp * cp}")
    t = s.reshape(rp // 128, cp // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(t.reshape(rp, cp)[:rows, :cols])


def unswizzle_order(rows: int, cols: int) -> np.ndarray:
    """Where each entry of a (rows, cols) scale matrix sits in its swizzled array: the int64
    (rows, cols) index array ``i`` with ``unswizzle_scales(s, rows, cols) == s[i]``. For scales
    already decoded to values (which :func:`unswizzle_scales`, taking bytes, does not read).

    rows, cols: non-negative integers."""
    rows = integer(rows, "rows", low=0)
    cols = integer(cols, "cols", low=0)
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    t = np.arange(rp * cp, dtype=np.int64).reshape(rp // 128, cp // 4, 32, 4, 4).transpose(0, 3, 2, 1, 4)
    return np.ascontiguousarray(t.reshape(rp, cp)[:rows, :cols])


def to_gpt_oss(q: MXTensor) -> tuple[np.ndarray, np.ndarray]:
    """An MXFP4 MXTensor blocked along its last axis by 32 -> (``*_blocks`` U8 [..., K/32, 16],
    ``*_scales`` U8 [..., K/32]) as gpt-oss checkpoints store them (low nibble first).

    q: a consistent MXTensor (as :func:`fmtsim.mx.dequantize` checks it)."""
    check_tensor(q)
    if q.scheme != "mxfp4" or q.block_size != 32 or q.axis != q.codes.ndim - 1:
        raise ValueError("gpt-oss layout needs MXFP4, block size 32, blocked along the last axis")
    k = q.codes.shape[-1]
    blocks = pack_fp4(q.codes.reshape(*q.codes.shape[:-1], k // 32, 32))
    return blocks, np.asarray(q.scales, dtype=np.uint8).copy()


def from_gpt_oss(blocks: Any, scales: Any) -> MXTensor:
    """gpt-oss (``*_blocks``, ``*_scales``) -> MXTensor (mxfp4, block 32, last axis).

    blocks: uint8 [..., K/32, 16]; scales: uint8 [..., K/32] (E8M0 codes)."""
    b = as_numpy(blocks, "blocks")
    s = as_numpy(scales, "scales")
    if b.dtype != np.uint8 or s.dtype != np.uint8:
        raise TypeError("gpt-oss blocks and scales are uint8 arrays")
    if b.ndim < 2 or b.shape[-1] != 16 or b.shape[:-1] != s.shape:
        raise ValueError(f"gpt-oss blocks [..., K/32, 16] and scales [..., K/32] disagree: {b.shape} vs {s.shape}")
    codes = unpack_fp4(b).reshape(*s.shape[:-1], s.shape[-1] * 32)
    return MXTensor(codes=codes, scales=s.copy(), scheme="mxfp4", axis=codes.ndim - 1, block_size=32,
                    scale_rule="floor", length=codes.shape[-1], shape=codes.shape)
