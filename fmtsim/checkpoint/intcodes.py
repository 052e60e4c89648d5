"""Integer weight layouts (int8, int4 per group) as producers store them: unpacking the codes and
zero points, laying the scales over the codes, and the exact value of every element.

One function per question, read by dequantize, inspect and explain alike, so a layout is decoded
in one place (the record's ``packing`` names it; see :mod:`fmtsim.checkpoint.producers`):

    byte              I8 [out, in], two's complement (compressed-tensors int-quantized, Quark int8)
    int4-rows         U8 [out/2, in]: output rows 2r and 2r+1 of a column in the low and high nibble
                      of one byte, two's complement (ModelOpt ``export/quant_utils.pack_int4_in_uint8``)
    int4x8-reorder-t  I32 [in, out/8]: the weight transposed, eight outputs per int32 in the nibble
                      order 0,2,4,6,1,3,5,7 (nibble k at bits 4k holds output 8j + ORDER[k]), two's
                      complement; scales and zero points [in/group, out] (Quark ``torch/utils/pack.py``
                      ``Pack_4_bits`` with ``pack_method: reorder``, transposed on export)
    int4x8-reorder    I32 [out, in/8]: the same nibble order, not transposed (Quark per channel: its
                      ``PackMethod.transpose`` turns only per-group weights); scale [out], a zero point
                      [out/8] packed the same way along the outputs
    int4x8, int8x4    I32 [out, ceil(in * b / 32)]: compressed-tensors ``pack-quantized`` with b = 4 or
                      8 bits: each code plus 2^(b-1) (so 0 .. 2^b - 1), element i of a row at bits
                      i*b .. i*b + b - 1 of the row read as one little-endian bit string (a word holds
                      32 / b codes; widths that do not divide 32 would straddle words), the row padded
                      with zeros to whole words; ``weight_shape`` holds the unpacked [out, in]; an
                      asymmetric zero point [out, groups] is packed the same way along dim 0
                      (compressed-tensors 0.19 ``compressors/pack_quantized/helpers.py``
                      ``pack_to_int32`` / ``unpack_from_int32``)

Values: w = (q - zero_point) * s_group [* pre_scale[column]]. (q - zp) has at most 9 significant
bits and s at most 24, so q x s is exact in float64; a pre-scale (ModelOpt AWQ's
``pre_quant_scale``, which multiplies the input: folding it into the weight's columns keeps the
layer's function) makes a second product, taken error-free, whose remainder's sign is returned as
the sticky part so that the one rounding to the target is correct.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..exactfloat import two_product
from .files import CheckpointError

__all__ = ["REORDER", "unpack_codes", "group_layout", "int_values", "config_group_sizes", "pack_codes",
           "zero_point_layout", "check_zero_point", "unpack_zero_point",
           "DENSE_BITS", "unpack_dense", "pack_dense", "dense_words", "unpack_fp6", "pack_fp6"]

REORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # output j of eight sits in nibble REORDER.index(j)
DENSE_BITS = {"int4x8": 4, "int8x4": 8}  # compressed-tensors pack-quantized: bits per code of each packing


def dense_words(n: int, bits: int) -> int:
    """int32 words compressed-tensors packs ``n`` codes of ``bits`` into (``ceil(n * bits / 32)``)."""
    return -(-n * bits // 32)


def unpack_dense(raw: np.ndarray, bits: int, n: int, packed_dim: int = 1) -> np.ndarray:
    """compressed-tensors pack-quantized int32 words -> int64 codes (offset 2^(bits-1) removed), the
    packed dimension cut to ``n``. Element i sits at bits i*bits of the row's little-endian bit string:
    the 64-bit pair (word k, word k+1) holds every element that starts in word k, whole."""
    u = np.ascontiguousarray(raw).view(np.uint32)
    if u.ndim != 2:
        raise CheckpointError(f"pack-quantized weights are 2-D, got {list(u.shape)}")
    if packed_dim == 0:
        u = u.T
    if not 1 <= bits <= 8 or dense_words(n, bits) != u.shape[1]:
        raise CheckpointError(f"{u.shape[1]} int32 words per row do not hold {n} codes of {bits} bits "
                              f"(compressed-tensors packs them into {dense_words(n, bits)})")
    wide = np.concatenate([u, np.zeros((u.shape[0], 1), np.uint32)], axis=1).astype(np.uint64)
    start = np.arange(n, dtype=np.int64) * bits
    pair = wide[:, start // 32] | (wide[:, start // 32 + 1] << np.uint64(32))
    q = ((pair >> (start % 32).astype(np.uint64)) & np.uint64((1 << bits) - 1)).astype(np.int64) - (1 << (bits - 1))
    return q.T.copy() if packed_dim == 0 else q


def unpack_fp6(raw: np.ndarray) -> np.ndarray:
    """Quark's FP6 bytes U8 [..., 3n/4] -> uint8 codes [..., n]: every three bytes are a little-endian 24-bit
    word holding four 6-bit codes, code k at bits 6k (Quark 0.13 ``torch/utils/pack.py`` ``Pack_fp6``; the
    layout the MI355 ``mfma_scale_f32_16x16x128_f8f6f4`` instruction reads). A code is the OCP FP6 encoding
    (sign in bit 5)."""
    b = np.ascontiguousarray(raw).view(np.uint8)
    if b.shape[-1] % 3:
        raise CheckpointError(f"FP6 rows of {b.shape[-1]} bytes are not whole groups of three")
    t = b.reshape(*b.shape[:-1], -1, 3).astype(np.uint32)
    word = t[..., 0] | (t[..., 1] << np.uint32(8)) | (t[..., 2] << np.uint32(16))
    codes = (word[..., None] >> (6 * np.arange(4, dtype=np.uint32))) & np.uint32(0x3F)
    return codes.reshape(*b.shape[:-1], -1).astype(np.uint8)


def pack_fp6(codes: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unpack_fp6`, for tests and tools."""
    c = np.asarray(codes, np.uint32).reshape(*np.shape(codes)[:-1], -1, 4)
    word = c[..., 0] | (c[..., 1] << 6) | (c[..., 2] << 12) | (c[..., 3] << 18)
    out = np.stack([word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF], axis=-1).astype(np.uint8)
    return out.reshape(*np.shape(codes)[:-1], -1)


def pack_dense(q: np.ndarray, bits: int, packed_dim: int = 1) -> np.ndarray:
    """The inverse of :func:`unpack_dense` (int64 codes -> int32 words), for tests and tools."""
    q = np.asarray(q, np.int64)
    if packed_dim == 0:
        q = q.T
    rows, n = q.shape
    v = (q + (1 << (bits - 1))).astype(np.uint64) & np.uint64((1 << bits) - 1)
    out = np.zeros((rows, dense_words(n, bits) + 1), np.uint64)
    start = np.arange(n, dtype=np.int64) * bits
    for i in range(n):  # a tool path: one column at a time keeps it obvious
        k, off = divmod(int(start[i]), 32)
        both = v[:, i] << np.uint64(off)
        out[:, k] |= both & np.uint64(0xFFFFFFFF)
        out[:, k + 1] |= both >> np.uint64(32)
    words = out[:, :-1].astype(np.uint32).view(np.int32)
    return words.T.copy() if packed_dim == 0 else words


def _signed4(n: np.ndarray, signed: bool = True) -> np.ndarray:
    n = n.astype(np.int64)
    return (n ^ 8) - 8 if signed else n


def unpack_codes(packing: str, raw: np.ndarray, signed: bool = True, cols: int | None = None) -> np.ndarray:
    """Stored codes -> int64 [out, in] (transposed layouts are turned back); ``signed``: two's
    complement nibbles (int4), else 0..15 (uint4, with a zero point). ``cols``: the unpacked row
    length of a compressed-tensors dense packing (its ``weight_shape``; default: every word full)."""
    if packing in DENSE_BITS:
        bits = DENSE_BITS[packing]
        return unpack_dense(raw, bits, cols if cols is not None else raw.shape[-1] * 32 // bits)
    if packing == "byte":
        return raw.view(np.int8).astype(np.int64)
    if packing == "int4-rows":
        b = raw.view(np.uint8)
        if b.ndim != 2:
            raise CheckpointError(f"int4-rows weights are 2-D [out/2, in], got {list(b.shape)}")
        q = np.stack([_signed4(b & 0xF), _signed4(b >> 4)], axis=1)  # [out/2, 2, in]
        return q.reshape(b.shape[0] * 2, b.shape[1])
    if packing == "int4x8-reorder":  # Quark per channel: the same nibble order, not transposed
        u = raw.view(np.uint32)
        u = u.reshape(1, -1) if u.ndim == 1 else u  # a zero point [out/8] packs one value per output row
        if u.ndim != 2:
            raise CheckpointError(f"reorder-packed int4 is 2-D [out, in/8], got {list(u.shape)}")
        nib = _signed4((u[:, :, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF, signed)
        q = np.empty_like(nib)
        q[:, :, list(REORDER)] = nib
        return q.reshape(u.shape[0], -1)
    if packing == "int4x8-reorder-t":
        u = raw.view(np.uint32)
        if u.ndim != 2:
            raise CheckpointError(f"reorder-packed int4 is 2-D [in, out/8], got {list(u.shape)}")
        nib = _signed4((u[:, :, None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF, signed)  # [in, out/8, k]
        q = np.empty_like(nib)
        q[:, :, list(REORDER)] = nib  # nibble k holds output REORDER[k] of the eight
        return q.reshape(u.shape[0], -1).T.copy()
    raise CheckpointError(f"packing {packing!r} is not an integer layout")  # pragma: no cover


def pack_codes(packing: str, q: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unpack_codes` (int64 [out, in] -> stored array), for tests and tools."""
    q = np.asarray(q, np.int64)
    if packing == "byte":
        return q.astype(np.int8)
    if packing == "int4-rows":
        n = (q & 0xF).astype(np.uint8)
        return (n[0::2] | (n[1::2] << 4)).astype(np.uint8)
    if packing in DENSE_BITS:
        return pack_dense(q, DENSE_BITS[packing])
    if packing == "int4x8-reorder":
        return pack_codes("int4x8-reorder-t", q.T)
    if packing == "int4x8-reorder-t":
        t = (q.T & 0xF).astype(np.uint32).reshape(q.shape[1], -1, 8)
        out = np.zeros(t.shape[:2], np.uint32)
        for k, j in enumerate(REORDER):
            out |= t[:, :, j] << np.uint32(4 * k)
        return out.view(np.int32)
    raise ValueError(f"packing {packing!r} is not an integer layout")


def config_group_sizes(configs: dict[str, Any]) -> set[int]:
    """Every weight group size a config file names (compressed-tensors config_groups, Quark's
    global/layer configs, ModelOpt's hf_quant_config)."""
    found: set[int] = set()

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("group_size", "block_size") and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    found.add(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for name in ("config.json", "hf_quant_config.json"):
        walk(configs.get(name))
    return found


def group_layout(packing: str, out_shape: tuple[int, int], scale_shape: tuple[int, ...],
                 configs: dict[str, Any], where: str) -> int:
    """Columns one scale covers (``in`` for per channel / per tensor). The scale's shape gives the
    group count; a group size is taken from it only when it divides the row, else from the config,
    and only when exactly one named size fits."""
    rows, cols = out_shape
    shape = tuple(int(v) for v in scale_shape)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if n == 1 or shape in ((rows,), (rows, 1), (1, rows)):
        return cols
    if packing == "int4x8-reorder-t":
        if len(shape) != 2 or shape[1] != rows:
            raise CheckpointError(f"{where}: scale {list(shape)} is not [in/group, {rows}]")
        groups = shape[0]
    else:
        if len(shape) != 2 or shape[0] != rows:
            raise CheckpointError(f"{where}: scale {list(shape)} is not [{rows}, in/group]")
        groups = shape[1]
    if cols % groups == 0:
        return cols // groups
    fits = sorted(g for g in config_group_sizes(configs) if -(-cols // g) == groups)
    if len(fits) != 1:
        raise CheckpointError(f"{where}: {groups} scale groups do not divide {cols} columns and the config names "
                              f"{'no' if not fits else 'more than one'} group size that fits ({fits or '-'})")
    return fits[0]


def _per_column(a: np.ndarray, packing: str, rows: int, cols: int, group: int) -> np.ndarray:
    """A scale or zero point array -> [out, in] float64/int64 (one value per element)."""
    a = np.asarray(a)
    if a.size == 1:
        return np.broadcast_to(a.reshape(1, 1), (rows, cols))
    if group == cols:
        return np.broadcast_to(a.reshape(rows, 1), (rows, cols))
    if packing == "int4x8-reorder-t":
        a = a.T
    return np.repeat(a, group, axis=1)[:, :cols]


def zero_point_layout(packing: str, rows: int, groups: int) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], str]:
    """The dtypes and shapes a producer stores the zero point of an [rows, groups]-scaled weight in, and the
    layout in words. A packed zero point is always unpacked by its layout, whatever its element count: eight
    rows of int4 pack into one int32 that holds eight zero points, not one.

    - compressed-tensors pack-quantized (channel and group strategies; 0.20
      ``compressors/pack_quantized/base.py`` packs the [out, groups] zero point with ``pack_to_int32(...,
      packed_dim=0)``): I32 [ceil(out * b / 32), groups], or per tensor (not packed) I8 [1] / [];
    - Quark per channel (0.13 ``torch/utils/pack.py`` ``Pack_4_bits.pack`` of the 1-D [out] zero point,
      nothing transposed): I32 [ceil(out / 8)];
    - Quark per group (``Pack_4_bits`` on the transposed [groups, out]): I32 [groups, ceil(out / 8)];
    - one byte per code (Quark int8): I8 / U8 / I32 with one value, or one per row."""
    if packing in DENSE_BITS:
        return (("I32",), ((dense_words(rows, DENSE_BITS[packing]), groups),),
                f"int32 [ceil(out * {DENSE_BITS[packing]} / 32), groups] = [{dense_words(rows, DENSE_BITS[packing])}, "
                f"{groups}] (packed along the outputs)")
    if packing == "int4x8-reorder":
        return ("I32",), ((-(-rows // 8),),), f"int32 [ceil(out / 8)] = [{-(-rows // 8)}] (eight outputs per word)"
    if packing == "int4x8-reorder-t":
        return (("I32",), ((groups, -(-rows // 8)),),
                f"int32 [groups, ceil(out / 8)] = [{groups}, {-(-rows // 8)}] (eight outputs per word)")
    if packing == "byte":
        return ("I8", "U8", "I32"), ((), (1,), (rows,), (rows, 1)), f"an integer per tensor or [{rows}] / [{rows}, 1]"
    return (), (), "no zero point"


def check_zero_point(packing: str, name: str, dtype: str, shape: tuple[int, ...], rows: int, groups: int,
                     where: str) -> None:
    """CheckpointError unless the zero point tensor ``name`` is stored as :func:`zero_point_layout` says.
    A per-tensor value (I8 [1] / []) is taken under compressed-tensors only (its tensor strategy does not
    pack the zero point)."""
    dtypes, shapes, words = zero_point_layout(packing, rows, groups)
    shape = tuple(int(v) for v in shape)
    ok = dtype in dtypes and shape in shapes
    if packing in DENSE_BITS and dtype == "I8" and shape in ((), (1,)) and groups == 1:
        ok = True
    if not ok:
        raise CheckpointError(f"{where}: zero point {name} is {dtype} {list(shape)}; a weight of {rows} rows and "
                              f"{groups} scale group(s) per row stores it as {words}")


def unpack_zero_point(packing: str, zero_point: np.ndarray, rows: int, groups: int, signed: bool = True
                      ) -> np.ndarray:
    """A stored zero point (checked by :func:`check_zero_point`) -> int64 [rows, groups]."""
    z = np.asarray(zero_point)
    if packing in DENSE_BITS and z.dtype.kind == "i" and z.dtype.itemsize == 4:
        return unpack_dense(z.reshape(-1, groups), DENSE_BITS[packing], rows, packed_dim=0)
    if packing == "int4x8-reorder":
        return unpack_codes(packing, z.reshape(1, -1), signed).reshape(-1)[:rows].reshape(rows, 1)
    if packing == "int4x8-reorder-t":
        return unpack_codes(packing, z.reshape(groups, -1), signed)[:rows]
    z64 = z.astype(np.int64).reshape(-1)
    return np.broadcast_to(z64.reshape(1, 1) if z64.size == 1 else z64.reshape(rows, 1), (rows, groups)).copy()


def int_values(packing: str, codes: np.ndarray, scale: np.ndarray, group: int, zero_point: np.ndarray | None,
               pre_scale: np.ndarray | None, signed: bool = True, cols: int | None = None,
               global_scale: float | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact float64 values [out, in] and, with a pre-scale, the sign of the part below float64
    (``cols``: the row length of a dense packing, see :func:`unpack_codes`; ``global_scale``: a
    per-tensor multiplier, Quark int4_fp8's FP8-level scale: (q - zp) s g needs at most 5 + 24 + 24 bits,
    exact in float64)."""
    q = unpack_codes(packing, codes, signed, cols)
    rows, cols = q.shape
    if zero_point is not None:
        groups = -(-cols // group)
        q = q - _per_column(unpack_zero_point(packing, zero_point, rows, groups, signed), "byte", rows, cols, group)
    s = _per_column(np.asarray(scale).astype(np.float64), packing, rows, cols, group)
    v = q.astype(np.float64) * s  # exact: 9 + 24 significant bits
    if global_scale is not None:
        if pre_scale is not None:  # pragma: no cover - no record has both
            raise CheckpointError("a global scale and a pre-scale together are not read")
        return v * np.float64(global_scale), None  # exact: 5 + 24 + 24 bits (int4 under a float32 scale)
    if pre_scale is None:
        return v, None
    p = np.asarray(pre_scale).astype(np.float64).reshape(-1)
    if p.size != cols:
        raise CheckpointError(f"pre-scale has {p.size} values for {cols} columns")
    hi, lo = two_product(v, np.broadcast_to(p[None, :], v.shape).copy())
    return hi, np.where(np.isfinite(hi), np.sign(lo), 0.0)
