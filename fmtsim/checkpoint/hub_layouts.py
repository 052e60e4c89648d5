"""optimum-quanto, HQQ and torchao checkpoints: each layout's codes, scales and exact values.

Read off each library's source and held to its own dequantization on fixtures it wrote
(tests/fixtures/hub/HUB2_README.md, tools/gen_hub2_fixtures.py). fmtsim gives every value exactly,
rounded once to the target; where a library rounds in between, the tests hold its bits to a model
of that arithmetic over fmtsim's decoding (said per layout below).

optimum-quanto 0.2.7 (``quanto_qmap.json`` beside the weights; ``<m>.weight.`` tensors):

- qint8 / qfloat8: ``_data`` I8 / F8_E4M3 [out, in], ``_scale`` BF16 [out, 1]; w = q * s (quanto's
  ``bf16(q * s)`` is that, rounded once).
- qint4 / qint2: ``_data._data`` U8, ``_scale`` and ``_shift`` BF16 [G, 1]: groups of ``gs`` values of
  a row when in_features > 128 (gs = 128, less 32 until it divides in_features), else one group per
  row; the [G, gs] matrix of codes (0 .. 2^bits - 1) packed along axis 0 in slices, the first slice in
  the low bits (qint4: byte r = v[r] | v[r + ceil(G/2)] << 4). w = q * s - shift; quanto computes
  bf16(bf16(q * s) - shift), two roundings.

HQQ 0.2.8 (``save_to_safetensors``; ``<m>.W_q`` beside ``scale``, ``zero``, ``shape``, ``nbits``,
``group_size``, ``packing`` ...): groups of ``group_size`` values of a row, the [G, group_size] codes
packed along axis 0 in slices with the first slice in the high bits, as the ``packing`` tensor names
it (4 bits: q[r] << 4 | q[r + G/2]; 3 bits: I32 rows of ten 3-bit fields, bits 29..0, G padded to a
multiple of 10; 5 and 6 bits: one code per byte, '8bit_u8'); ``scale`` (a
multiplier) and ``zero`` (fractional) BF16 [G, 1]. w = (q - zero) * scale; HQQ computes
bf16(bf16(q - zero) * scale), two roundings.

torchao 0.18 (``quantization_config.quant_method: torchao``; ``<m>._weight_<attr>``, the tensor
subclass named in the safetensors metadata):

- Int8Tensor / Float8Tensor: ``qdata`` I8 / F8_E4M3 [out, in], ``scale`` F32 [out, 1] (``zero_point``
  I8, zero); IntxUnpackedToInt8Tensor: ``qdata`` I8 [out, in] (int4 values, one per byte), ``scale``
  BF16 [out, in / g], ``zero_point`` I8 [out, in / g]; w = (q - zp) * s.
- MXTensor: ``qdata`` F8_E4M3 [out, in] or U8 [out, in / 2] (E2M1, the even column in the low
  nibble), ``scale`` F8_E8M0 in cuBLAS's 128x4 blocked layout; w = q * 2^(e - 127).
- NVFP4Tensor: ``qdata`` U8 E2M1, ``scale`` F8_E4M3 blocked (one per 16), ``per_tensor_scale`` F32;
  w = e2m1 * e4m3 * per_tensor_scale; torchao computes bf16(f32(e2m1) * f32(pts * e4m3)), two roundings
  in float32 and one into bfloat16.
"""

from __future__ import annotations

import json
from typing import Any

import ml_dtypes
import numpy as np

from .files import CheckpointError

__all__ = ["awq_gemv_fast_values", "awq_marlin_values", "awq_gemv_values", "GEMV_FAST_PERM", "HQQ_PACKINGS",
           "library_dtype", "quanto_library", "hqq_library", "torchao_library", "linear_shape_from_config",
           "quanto_group_size", "quanto_unpack", "quanto_values", "hqq_unpack", "hqq_values", "TORCHAO_KINDS",
           "torchao_kind", "unswizzle_scales", "torchao_values", "E2M1_VALUES"]

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


# -- optimum-quanto -----------------------------------------------------------------------------

_LINEAR_DIMS = {  # Llama-style module name -> (out, in) from config.json's sizes
    "q_proj": ("heads", "hidden"), "k_proj": ("kv", "hidden"), "v_proj": ("kv", "hidden"),
    "o_proj": ("hidden", "heads"), "gate_proj": ("intermediate", "hidden"), "up_proj": ("intermediate", "hidden"),
    "down_proj": ("hidden", "intermediate"),
}


def linear_shape_from_config(layer: str, config: dict[str, Any] | None) -> tuple[int, int] | None:
    """[out, in] of a Llama-style projection (q/k/v/o, gate/up/down) from config.json; None if not one."""
    if not isinstance(config, dict):
        return None
    kind = layer.rsplit(".", 1)[-1]
    if kind not in _LINEAR_DIMS:
        return None
    try:
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or hidden // heads)
        sizes = {"hidden": hidden, "heads": heads * head_dim,
                 "kv": int(config.get("num_key_value_heads") or heads) * head_dim,
                 "intermediate": int(config["intermediate_size"])}
    except (KeyError, TypeError, ValueError):
        return None
    out_key, in_key = _LINEAR_DIMS[kind]
    return sizes[out_key], sizes[in_key]


def quanto_group_size(in_features: int) -> int | None:
    """QModuleMixin's weight group size: 128, lowered by 32 until it divides in_features (down to 32), used only
    when in_features > 128; None (one group per row) otherwise."""
    if in_features <= 128:
        return None
    gs = 128
    while in_features % gs and gs > 32:
        gs -= 32
    return gs if in_features % gs == 0 else None


def quanto_unpack(packed: np.ndarray, bits: int, rows: int) -> np.ndarray:
    """quanto's pack_weights inverse: packed [ceil(rows / k), C] -> codes [rows, C]; slice i in bits i*bits."""
    k = 8 // bits
    p = np.asarray(packed).view(np.uint8)
    slices = [(p >> (bits * i)) & ((1 << bits) - 1) for i in range(k)]
    return np.concatenate(slices, axis=0)[:rows].astype(np.int64)


def quanto_values(qtype: str, data: np.ndarray, scale: np.ndarray, shift: np.ndarray | None,
                  shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact float64 weights [out, in] (and the sign of any remainder below float64, for the one rounding)."""
    if len(shape) != 2:
        raise CheckpointError(f"quanto weights are 2-D, got {list(shape)}")
    out_f, in_f = shape
    s = scale.astype(np.float64)
    if qtype in ("qint8", "qfloat8_e4m3fn", "qfloat8"):
        q = data.astype(np.float64)
        if q.shape != shape or s.reshape(-1).size != out_f:
            raise CheckpointError(f"quanto {qtype}: data {list(q.shape)} with scale {list(scale.shape)}; [out, in] "
                                  "and [out, 1] expected")
        return q * s.reshape(-1, 1), None  # an 8-bit code times a bfloat16: exact
    bits = {"qint4": 4, "qint2": 2}.get(qtype)
    if bits is None or shift is None:
        raise CheckpointError(f"quanto weights {qtype!r}: fmtsim reads qint8, qint4, qint2 and qfloat8_e4m3fn")
    gs = quanto_group_size(in_f)
    groups, width = (out_f * in_f // gs, gs) if gs else (out_f, in_f)
    if s.reshape(-1).size != groups or shift.size != groups:
        raise CheckpointError(f"quanto {qtype}: {s.size} scales for {groups} groups of {width}")
    q = quanto_unpack(data, bits, groups)
    if q.shape != (groups, width):
        raise CheckpointError(f"quanto {qtype}: packed {list(data.shape)} does not hold [{groups}, {width}] codes")
    prod = q * s.reshape(-1, 1)  # <= 2 bits + 8: exact
    sh = shift.astype(np.float64).reshape(-1, 1)
    v = prod - sh
    err = _two_sum_err(prod, -sh, v)
    return v.reshape(out_f, in_f), np.sign(err).reshape(out_f, in_f)


def _two_sum_err(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The exact remainder (a + b) - s of the float64 sum s = fl(a + b) (Knuth's two-sum)."""
    bb = s - a
    return (a - (s - bb)) + (b - bb)


# -- AWQ GEMV -------------------------------------------------------------------------------------

def _plain_nibbles(words: np.ndarray) -> np.ndarray:
    """int32 words -> their eight nibbles in order (nibble i of word c is entry 8c + i)."""
    u = np.asarray(words).view(np.uint32).astype(np.int64)
    return ((u[..., None] >> (4 * np.arange(8))) & 0xF).reshape(*u.shape[:-1], -1)


def awq_gemv_values(qweight: np.ndarray, qzeros: np.ndarray, scales: np.ndarray, group: int
                    ) -> tuple[np.ndarray, None]:
    """autoawq's GEMV layout: qweight I32 [out, in/8] (nibble i of word c = input 8c + i), qzeros I32
    [out, ZW] (nibble i of word c = the zero of group 8c + i), scales F16 [out, 8 ZW], the columns from
    in/group on padding. Exact (q - z) * s, [out, in]."""
    q = _plain_nibbles(qweight)
    out_f, in_f = q.shape
    if in_f % group:
        raise CheckpointError(f"AWQ GEMV: {in_f} inputs are not whole groups of {group}")
    ng = in_f // group
    z = _plain_nibbles(qzeros)
    if z.shape[0] != out_f or z.shape[1] < ng or scales.shape[0] != out_f or scales.shape[1] < ng:
        raise CheckpointError(f"AWQ GEMV: qzeros {list(qzeros.shape)} and scales {list(scales.shape)} do not hold "
                              f"{ng} groups for {out_f} outputs")
    g = np.arange(in_f) // group
    return (q - z[:, g]).astype(np.float64) * scales.astype(np.float64)[:, g], None


def _nibbles_of(words: np.ndarray, bits: int) -> np.ndarray:
    """Each integer word's 4-bit fields, lowest first: [..., n] -> [..., n * bits / 4]."""
    u = np.asarray(words).view(np.uint16 if bits == 16 else np.uint32).astype(np.int64)
    k = bits // 4
    return ((u[..., None] >> (4 * np.arange(k))) & 0xF).reshape(*u.shape[:-1], -1)


# GEMV_fast: within each 32 inputs, position t holds input GEMV_FAST_PERM[t]: the inputs 0, 8, 16, 24, 1, 9,
# ... (autoawq gemv_fast.py pack_intweight's 4 x 4 x 2 transposition)
GEMV_FAST_PERM = np.arange(32).reshape(4, 4, 2).transpose(1, 0, 2).transpose(0, 2, 1).reshape(32)


def awq_gemv_fast_values(qweight: np.ndarray, scales: np.ndarray, scaled_zeros: np.ndarray, group: int
                         ) -> tuple[np.ndarray, None]:
    """autoawq's GEMV_fast layout: qweight I16 [out/4, in] (four output rows interleaved per 64 inputs, each
    32 inputs reordered by GEMV_FAST_PERM), scales and qzeros F16 [8 ZW, out] (transposed, padded), qzeros
    the float16 'scaled zero' -(scale * zero). The value is what the layout stores, q * s + qzeros, exactly
    (autoawq's CUDA kernel takes it as one fused multiply-add in float16: one rounding)."""
    n4, k = qweight.shape
    if k % 64:
        raise CheckpointError(f"AWQ GEMV_fast: {k} inputs are not whole blocks of 64")
    n = 4 * n4
    # int16 word [r, 64b + j], nibble i: reordered row 4r + j // 16, position 64b + 4 (j % 16) + i
    p = _nibbles_of(qweight, 16).reshape(n4, k // 64, 4, 64).transpose(0, 2, 1, 3).reshape(n, k)
    q = np.empty_like(p)
    q.reshape(n, k // 32, 32)[:, :, GEMV_FAST_PERM] = p.reshape(n, k // 32, 32)
    if k % group or scales.shape[0] < k // group or scales.shape[1] != n or scaled_zeros.shape != scales.shape:
        raise CheckpointError(f"AWQ GEMV_fast: scales {list(scales.shape)} / qzeros {list(scaled_zeros.shape)} do "
                              f"not hold {k // group} groups of {group} for {n} outputs")
    g = np.arange(k) // group
    s = scales.astype(np.float64)[: k // group].T[:, g]
    z = scaled_zeros.astype(np.float64)[: k // group].T[:, g]
    return q * s + z, None  # 4 bits x 11 + an 11-bit addend: exact in float64


def _marlin_perm() -> np.ndarray:
    """Marlin's order of each 1024 values of a 16 x 64 strip of tiles: new position j takes old MARLIN[j]
    (IST-DASLab's Marlin layout, as autoawq marlin.py _get_perms builds it, with its 0,2,4,6,1,3,5,7
    interleave of each 8)."""
    i = np.arange(32)[:, None, None, None]
    j = np.arange(4)[None, :, None, None]
    block = np.arange(2)[None, None, :, None]
    base = 2 * (i % 4)
    rows = np.concatenate([base, base + 1, 2 * (i % 4 + 4), 2 * (i % 4 + 4) + 1], axis=3)  # [32, 1, 1, 4]
    perm = (256 * j + 16 * rows + i // 4 + 8 * block).reshape(-1)
    return perm.reshape(-1, 8)[:, [0, 2, 4, 6, 1, 3, 5, 7]].reshape(-1)


def _marlin_scale_perm(single: bool) -> np.ndarray:
    if single:
        return np.array([2 * i + j for i in range(4) for j in (0, 1, 8, 9, 16, 17, 24, 25)])
    return np.array([i + 8 * j for i in range(8) for j in range(8)])


def awq_marlin_values(qweight: np.ndarray, scales: np.ndarray, group: int) -> tuple[np.ndarray, None]:
    """autoawq's Marlin layout: qweight I32 [in/16, 2 out] (16 x 16 tiles, each 1024 values in Marlin's order,
    eight nibbles a word, the code + 8), scales F16 [groups, out] permuted in runs of 64 (32 with one group);
    symmetric: (nibble - 8) * scale. [out, in], exact."""
    k16, n2 = qweight.shape
    k, n = 16 * k16, n2 // 2
    res = _nibbles_of(qweight, 32).reshape(k16, 16 * n)  # [in/16, 16 out] after the tile reshape
    perm = _marlin_perm()
    if res.size % perm.size:
        raise CheckpointError(f"AWQ Marlin: qweight {list(qweight.shape)} is not whole 1024-value runs")
    tiles = np.empty_like(res)
    tiles.reshape(-1, perm.size)[:, perm] = res.reshape(-1, perm.size)
    q = tiles.reshape(k16, n // 16, 16, 16).transpose(0, 2, 1, 3).reshape(k, n) - 8  # [in, out]
    sp = _marlin_scale_perm(group >= k)
    if scales.size % sp.size:
        raise CheckpointError(f"AWQ Marlin: scales {list(scales.shape)} are not whole runs of {sp.size}")
    flat = np.empty(scales.size, np.float64)
    flat.reshape(-1, sp.size)[:, sp] = scales.astype(np.float64).reshape(-1, sp.size)
    g = np.arange(k) // min(group, k)
    return (q * flat.reshape(-1, n)[g, :]).T.copy(), None


# -- HQQ ------------------------------------------------------------------------------------------

def _ascii(t: np.ndarray) -> str:
    return bytes(np.asarray(t).astype(np.uint8).reshape(-1)).decode("ascii", "replace")


HQQ_PACKINGS = {"8bit_u8": 8, "4bit_u8": 4, "2bit_u8": 2, "1bit_u8": 1, "3bit_32": 3}  # -> bits per field


def hqq_unpack(w_q: np.ndarray, packing: str, groups: int) -> np.ndarray:
    """HQQ's BitPack inverse by its packing name: codes [groups, group_size]; slice i in the high bits first.
    HQQ stores 5- and 6-bit codes one per byte ('8bit_u8') and 1.58-bit ones as '2bit_u8'."""
    bits = HQQ_PACKINGS.get(packing)
    if bits is None:
        raise CheckpointError(f"HQQ packing {packing!r}: fmtsim reads {', '.join(HQQ_PACKINGS)}")
    if bits == 8:
        return np.asarray(w_q).view(np.uint8).astype(np.int64)[:groups]
    if bits == 3:
        u = np.asarray(w_q).view(np.uint32).astype(np.int64)
        slices = [(u >> (27 - 3 * i)) & 7 for i in range(10)]
    else:
        u = np.asarray(w_q).view(np.uint8).astype(np.int64)
        slices = [(u >> (8 - bits * (i + 1))) & ((1 << bits) - 1) for i in range(8 // bits)]
    return np.concatenate(slices, axis=0)[:groups]


def hqq_values(read: Any, layer: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact float64 weights [out, in] of HQQ layer ``layer`` (tensors read by ``read(name)``)."""
    shape = tuple(int(v) for v in read(layer + ".shape").reshape(-1))
    packing = _ascii(read(layer + ".packing"))
    gsize = int(read(layer + ".group_size").reshape(-1)[0])
    axis = int(read(layer + ".axis").reshape(-1)[0])
    if len(shape) != 2 or axis != 1 or (shape[0] * shape[1]) % gsize:
        raise CheckpointError(f"{layer}: HQQ shape {list(shape)}, axis {axis}, group size {gsize}: fmtsim reads "
                              "axis 1 (groups along rows) with whole groups")
    for flag in ("view_as_float", "quant_scale", "quant_zero", "offload_meta"):
        name = layer + "." + flag
        if int(np.asarray(read(name)).reshape(-1)[0]) if _has(read, name) else 0:
            raise CheckpointError(f"{layer}: HQQ {flag} is set; fmtsim reads plain bfloat16/float16 scale and zero")
    groups = shape[0] * shape[1] // gsize
    q = hqq_unpack(read(layer + ".W_q"), packing, groups)
    zero = read(layer + ".zero").astype(np.float64).reshape(-1, 1)
    scale = read(layer + ".scale").astype(np.float64).reshape(-1, 1)
    if q.shape != (groups, gsize) or zero.size != groups or scale.size != groups:
        raise CheckpointError(f"{layer}: HQQ W_q gives {list(q.shape)} codes for {groups} groups of {gsize}, with "
                              f"{zero.size} zeros and {scale.size} scales")
    diff = q - zero
    err = _two_sum_err(q.astype(np.float64), -zero, diff)
    if np.any(err != 0):  # q - zero not a float64: the product below would not be exact
        raise CheckpointError(f"{layer}: HQQ zero points too far below the codes for an exact product")
    return (diff * scale).reshape(shape), None  # (<= 16 significant bits) x bfloat16: exact


def _has(read: Any, name: str) -> bool:
    try:
        read(name)
    except KeyError:
        return False
    return True


# -- torchao --------------------------------------------------------------------------------------

TORCHAO_KINDS = ("Int8Tensor", "Float8Tensor", "IntxUnpackedToInt8Tensor", "MXTensor", "NVFP4Tensor")


def torchao_kind(metadata: dict[str, str], weight_name: str) -> tuple[str, dict[str, Any]]:
    """The tensor subclass torchao's safetensors metadata names for ``<module>.weight``, and its _data."""
    raw = metadata.get(weight_name)
    if raw is None:
        raise CheckpointError(f"{weight_name}: no entry in the safetensors metadata (torchao writes one per "
                              "flattened tensor subclass)")
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{weight_name}: its metadata entry is not JSON ({e})") from None
    kind = d.get("_type")
    if kind not in TORCHAO_KINDS:
        raise CheckpointError(f"{weight_name}: torchao {kind!r}; fmtsim reads {', '.join(TORCHAO_KINDS)}")
    return kind, d.get("_data") or {}


def unswizzle_scales(blocked: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """cuBLAS's 128x4 blocked scale layout (torchao to_blocked) -> the natural [rows, cols] scales."""
    flat = np.asarray(blocked).reshape(-1)
    col_tiles = -(-cols // 4)
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    idx = ((r // 128) * col_tiles + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4
    if idx.max() >= flat.size:
        raise CheckpointError(f"blocked scales of {flat.size} entries do not cover [{rows}, {cols}]")
    return flat[idx]


def torchao_values(kind: str, attrs: dict[str, Any], qdata: np.ndarray, scale: np.ndarray,
                   zero_point: np.ndarray | None, per_tensor_scale: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray | None]:
    """Exact float64 weights [out, in] (and the sticky sign of the remainder for NVFP4's triple product)."""
    if kind in ("Int8Tensor", "Float8Tensor", "IntxUnpackedToInt8Tensor"):
        q = qdata.astype(np.float64)
        out_f, in_f = q.shape
        s = scale.astype(np.float64)
        if s.shape[0] != out_f or in_f % s.shape[1]:
            raise CheckpointError(f"torchao {kind}: scale {list(s.shape)} over data {list(q.shape)}")
        g = in_f // s.shape[1]
        z = np.zeros_like(s) if zero_point is None else zero_point.astype(np.float64)
        # (q - zp) has <= 9 bits, the scale <= 24: exact
        return (q - np.repeat(z, g, axis=1)) * np.repeat(s, g, axis=1), None
    block = int(attrs.get("block_size", 32 if kind == "MXTensor" else 16))
    if kind == "MXTensor":
        fp4 = qdata.dtype == np.uint8
        codes = _fp4(qdata) if fp4 else None
        out_f = qdata.shape[0]
        in_f = qdata.shape[1] * (2 if fp4 else 1)
        e = scale.view(np.uint8)
        e = unswizzle_scales(e, out_f, in_f // block) if attrs.get("is_swizzled_scales") else e.reshape(out_f, -1)
        el = E2M1_VALUES[codes] if fp4 else qdata.astype(np.float64)
        factor = np.where(e == 255, np.nan, np.exp2(e.astype(np.float64) - 127))
        return el * np.repeat(factor, block, axis=1), None
    if kind == "NVFP4Tensor":
        codes = _fp4(qdata)
        out_f, in_f = codes.shape
        s = scale.view(ml_dtypes.float8_e4m3fn)
        s = unswizzle_scales(s, out_f, in_f // block) if attrs.get("is_swizzled_scales") else s.reshape(out_f, -1)
        pts = 1.0 if per_tensor_scale is None else float(np.asarray(per_tensor_scale, np.float64).reshape(-1)[0])
        sv = s.astype(np.float64) * pts  # e4m3 (4 bits) x float32 (24): exact
        return E2M1_VALUES[codes] * np.repeat(sv, block, axis=1), None  # x e2m1 (2 bits): exact
    raise CheckpointError(f"torchao {kind}: not read")  # pragma: no cover - torchao_kind checked it


def _fp4(packed: np.ndarray) -> np.ndarray:
    b = np.asarray(packed).view(np.uint8)
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[0], -1).astype(np.int64)


# -- the libraries' own arithmetic (dequantize(arithmetic="library")) -------------------------------

def library_dtype(scale: np.ndarray) -> np.dtype:
    """The float type quanto and HQQ compute in: that of their stored scales (bfloat16 or float16)."""
    dt = np.asarray(scale).dtype
    return dt if dt in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)) else np.dtype(np.float32)


def _in(dt: np.dtype, x: np.ndarray) -> np.ndarray:
    """x rounded once into dt (from float32 values exact there, or float64 ones exact in float32)."""
    return np.asarray(x, dtype=np.float32).astype(dt)


def quanto_library(qtype: str, data: np.ndarray, scale: np.ndarray, shift: np.ndarray | None,
                   shape: tuple[int, ...]) -> np.ndarray:
    """quanto's own QBitsDequantizer (qint4 / qint2): dt(dt(q * s) - shift), float32 values; qint8 / qfloat8
    round once (the exact value rounded into dt)."""
    dt = library_dtype(scale)
    if qtype not in ("qint4", "qint2") or shift is None:
        exact, _ = quanto_values(qtype, data, scale, shift, shape)
        return exact.astype(np.float32).astype(dt).astype(np.float32)  # q * s fits float32 exactly
    out_f, in_f = shape
    gs = quanto_group_size(in_f)
    groups = out_f * in_f // gs if gs else out_f
    q = quanto_unpack(data, {"qint4": 4, "qint2": 2}[qtype], groups).astype(np.float32)
    prod = _in(dt, q * scale.astype(np.float32).reshape(-1, 1)).astype(np.float32)
    return _in(dt, prod - shift.astype(np.float32).reshape(-1, 1)).astype(np.float32).reshape(shape)


def hqq_library(read: Any, layer: str) -> np.ndarray:
    """HQQ's own Quantizer.dequantize: dt(dt(q - zero) * scale) in its compute dtype, float32 values."""
    scale = read(layer + ".scale")
    dt = library_dtype(scale)
    shape = tuple(int(v) for v in read(layer + ".shape").reshape(-1))
    gsize = int(read(layer + ".group_size").reshape(-1)[0])
    groups = shape[0] * shape[1] // gsize
    q = hqq_unpack(read(layer + ".W_q"), _ascii(read(layer + ".packing")), groups).astype(np.float32)
    diff = _in(dt, q - read(layer + ".zero").astype(np.float32).reshape(-1, 1)).astype(np.float32)
    return _in(dt, diff * scale.astype(np.float32).reshape(-1, 1)).astype(np.float32).reshape(shape)


def torchao_library(kind: str, attrs: dict[str, Any], qdata: np.ndarray, scale: np.ndarray,
                    zero_point: np.ndarray | None, per_tensor_scale: np.ndarray | None) -> np.ndarray:
    """torchao's own dequantize() into bfloat16 (its orig_dtype), float32 values: NVFP4 rounds the scale
    product in float32 and the element product in float32 before bfloat16; the others round once."""
    bf = np.dtype(ml_dtypes.bfloat16)
    if kind != "NVFP4Tensor":
        exact, _ = torchao_values(kind, attrs, qdata, scale, zero_point, per_tensor_scale)
        return exact.astype(np.float32).astype(bf).astype(np.float32)  # every product exact in float32
    codes = _fp4(qdata)
    out_f, in_f = codes.shape
    block = int(attrs.get("block_size", 16))
    s = scale.view(ml_dtypes.float8_e4m3fn)
    s = unswizzle_scales(s, out_f, in_f // block) if attrs.get("is_swizzled_scales") else s.reshape(out_f, -1)
    pts = np.float32(1.0 if per_tensor_scale is None else np.asarray(per_tensor_scale, np.float32).reshape(-1)[0])
    hp = (pts * s.astype(np.float32)).astype(np.float32)
    return (E2M1_VALUES[codes].astype(np.float32) * np.repeat(hp, block, axis=1)).astype(bf).astype(np.float32)
