"""ggml's reference quantizers (``quantize_row_*_ref`` in ``ggml-quants.c``), byte for byte.

These are what ``llama-quantize`` runs for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, NVFP4, Q1_0, Q2_0,
TQ1_0 and TQ2_0 when no importance matrix is given (with one, ggml searches per block and these do
not apply; TQ1_0 and TQ2_0 ignore it), Q8_K's (the activation side of the K-quant dot products), and
what gguf-py's ``quants.quantize`` mirrors for Q4_0 .. Q8_0, MXFP4, TQ1_0 and TQ2_0. Each step is
ggml's float32 expression in its order, one rounding per operation, as a build without fused
multiply-add computes it:

- Q4_0 / Q5_0: the element of largest magnitude (the first, on ties) ``max``; ``d = max / -8``
  (``/ -16``); ``id = 1/d`` (0 when d is 0); code ``min(15, trunc(x*id + 8.5))`` (``31``, ``16.5``);
  ``d`` stored as float16, rounded to nearest even.
- Q4_1 / Q5_1: ``d = (max - min) / 15`` (``31``), codes ``trunc((x - min)*id + 0.5)`` (Q4_1 capped
  at 15); ``d`` and ``min`` stored as float16.
- Q8_0: ``d = amax / 127``, codes ``roundf(x*id)`` (half away from zero).
- MXFP4: ``e = floorf(log2f(amax)) - 2 + 127`` (0 for an all-zero block); each element the first of
  ggml's 16 doubled E2M1 values ``kv`` with the least ``|kv*d - x|``, ``d = 2^(e-128)``: a tie goes
  to the smaller magnitude, and a value that rounds to zero is +0 (code 0), never -0.
- NVFP4: per 16 elements, ``ue = fp32_to_ue4m3(amax / 6)`` (ggml's own rounding: half up on the
  mantissa, clamped at 448, never 0x7F), then the elements as MXFP4's, with ``d`` the halved scale.
- Q1_0: ``d`` = the float32 sum of |x| in element order, / 128; bit j = x >= 0 (-0.0 reads +d).
- Q2_0: ``d = amax``, codes ``clamp(roundf(x/d) + 1, 0, 3)``.
- TQ1_0 / TQ2_0: ``d = amax``, trits ``lroundf(x/d) + 1``; TQ1_0 packs five (four, then x3) per byte
  as a base-3 number, first trit most significant, scaled by ceil(q * 256 / 243).
- Q8_K: the signed element of largest magnitude ``max``, ``iscale = -127 / max``, codes
  ``min(127, nearest_int(iscale * x))`` (ties to even), sums of 16, float32 ``d = 1 / iscale``.

``log2f`` is glibc's, which is correctly rounded on the inputs where it matters (amax just below a
power of two, where the rounding decides the floor); fmtsim rounds the float64 logarithm to float32,
the same there. NaN inputs are not modelled (ggml's comparisons let them fall through differently
per type): :func:`quantize_ref` refuses them.
"""

from __future__ import annotations

import numpy as np

from . import ggml
from . import ggml_tables as T

__all__ = ["REFERENCE_QUANTIZERS", "quantize_ref", "fp32_to_fp16_bits", "fp32_to_ue4m3"]

F32 = np.float32


def fp32_to_fp16_bits(x: np.ndarray) -> np.ndarray:
    """GGML_FP32_TO_FP16 for finite inputs: round to nearest even (numpy's cast does the same)."""
    return np.asarray(x, dtype=F32).astype(np.float16).view(np.uint16)


def fp32_to_ue4m3(x: np.ndarray) -> np.ndarray:
    """ggml_fp32_to_ue4m3, elementwise."""
    x = np.asarray(x, dtype=F32)
    pos = x > 0
    x = np.minimum(np.where(pos, x, F32(1.0)), F32(448.0))
    bits = x.view(np.uint32).astype(np.int64)
    exp = ((bits >> 23) & 0xFF) - 127 + 7
    man = ((bits >> 20) & 7) + ((bits >> 19) & 1)
    carry = man > 7
    exp = np.where(carry, exp + 1, exp)
    man = np.where(carry, 0, man)
    normal = np.where(exp >= 15, 0x7E, (exp << 3) | man)
    sub_man = np.minimum((x * F32(512.0) + F32(0.5)).astype(np.int64), 7)  # (int) truncates
    sub = np.where(sub_man < 1, 0, sub_man)
    out = np.where(((bits >> 23) & 0xFF) - 127 + 7 <= 0, sub, normal)
    return np.where(pos, out, 0).astype(np.uint8)


def _first_abs_max(x: np.ndarray) -> np.ndarray:
    """The signed element of largest magnitude per row, the first on ties (ggml's ``amax < fabsf(v)``)."""
    return np.take_along_axis(x, np.argmax(np.abs(x), axis=1)[:, None], axis=1)


def _inverse(d: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1.0) / np.where(d != 0, d, F32(1.0)), F32(0.0)).astype(F32)


def _pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """ggml's split order: byte j holds element j (low nibble) and element j + block/2 (high)."""
    half = codes.shape[1] // 2
    return (codes[:, :half] | (codes[:, half:] << 4)).astype(np.uint8)


def _f16_bytes(v: np.ndarray) -> np.ndarray:
    return fp32_to_fp16_bits(v.reshape(-1)).view(np.uint8).reshape(-1, 2)


def _symmetric(x: np.ndarray, divisor: float, offset: float, cap: int) -> tuple[np.ndarray, np.ndarray]:
    d = _first_abs_max(x) / F32(divisor)
    codes = np.minimum(cap, ((x * _inverse(d)) + F32(offset)).astype(np.int8).astype(np.int64))
    return d, codes


def _asymmetric(x: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = (hi - lo) / F32(levels)
    return d, lo, ((x - lo) * _inverse(d) + F32(0.5))


def _fifth_bits(codes: np.ndarray) -> np.ndarray:
    """The 32 fifth bits as the block's little-endian uint32 ``qh`` (bit j = element j)."""
    bits = ((codes >> 4) & 1).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    return bits.sum(axis=1).astype("<u4").view(np.uint8).reshape(-1, 4)


def _q4_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric(x, -8, 8.5, 15)
    return np.concatenate([_f16_bytes(d), _pack_nibbles(q)], axis=1)


def _q5_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric(x, -16, 16.5, 31)
    return np.concatenate([_f16_bytes(d), _fifth_bits(q), _pack_nibbles(q & 0xF)], axis=1)


def _q4_1(x: np.ndarray) -> np.ndarray:
    d, lo, scaled = _asymmetric(x, 15)
    q = np.minimum(15, scaled.astype(np.int8).astype(np.int64))
    return np.concatenate([_f16_bytes(d), _f16_bytes(lo), _pack_nibbles(q)], axis=1)


def _q5_1(x: np.ndarray) -> np.ndarray:
    d, lo, scaled = _asymmetric(x, 31)
    q = scaled.astype(np.uint8).astype(np.int64)  # ggml casts to uint8_t without a cap here
    return np.concatenate([_f16_bytes(d), _f16_bytes(lo), _fifth_bits(q), _pack_nibbles(q & 0xF)], axis=1)


def _q8_0(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=1, keepdims=True) / F32(127)
    v = (x * _inverse(d)).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)  # roundf, exactly: half away from zero
    return np.concatenate([_f16_bytes(d), q.view(np.uint8)], axis=1)


_KV = T.KVALUES_MXFP4.astype(F32)


def _best_index(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ggml's best_index_mxfp4: argmin over the 16 values of |kv*d - x| in float32, the first on ties."""
    err = np.abs((_KV * d[..., None]) - x[..., None])  # kv*d is exact: a small integer times a power of two
    return np.argmin(err, axis=-1).astype(np.int64)


def _mxfp4(x: np.ndarray) -> np.ndarray:
    amax = np.abs(x).max(axis=1)
    with np.errstate(divide="ignore"):
        log2f = np.log2(amax.astype(np.float64)).astype(F32)  # correctly rounded log2f, as glibc's is here
    e_float = np.floor(log2f) - F32(2) + F32(127)
    # (uint8_t) of the float: x86-64 gcc converts through int32 and keeps the low byte
    e = np.where(amax > 0, np.where(np.isfinite(e_float), e_float, 0).astype(np.int64) & 0xFF, 0)
    d = ggml.E8M0_HALF[e]
    codes = _best_index(x, np.repeat(d[:, None], x.shape[1], axis=1))
    return np.concatenate([e.astype(np.uint8)[:, None], _pack_nibbles(codes)], axis=1)


def _nvfp4(x: np.ndarray) -> np.ndarray:
    sub = x.reshape(len(x), 4, 16)
    ue = fp32_to_ue4m3(np.abs(sub).max(axis=2) / F32(6.0))  # (n, 4)
    d = ggml.UE4M3_HALF[ue]
    codes = _best_index(sub, np.repeat(d[:, :, None], 16, axis=2))  # (n, 4, 16)
    packed = np.concatenate([_pack_nibbles(codes[:, s]) for s in range(4)], axis=1)
    return np.concatenate([ue, packed], axis=1)


def _lround(v: np.ndarray) -> np.ndarray:
    """roundf / lroundf of float32 values: half away from zero (exact in float64)."""
    v = np.asarray(v, dtype=np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


def _q1_0(x: np.ndarray) -> np.ndarray:
    # d = (sum of |x| in element order, float32) / 128; a bit per element: x >= 0 (so -0.0 is +d)
    d = np.cumsum(np.abs(x), axis=1, dtype=F32)[:, -1:] / F32(128)
    bits = (x >= 0).astype(np.uint8).reshape(len(x), 16, 8)
    return np.concatenate([_f16_bytes(d), (bits << np.arange(8, dtype=np.uint8)).sum(axis=2, dtype=np.uint8)],
                          axis=1)


def _q2_0(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=1, keepdims=True)
    q = np.clip(_lround(x * _inverse(d)) + 1, 0, 3).reshape(len(x), 16, 4)
    packed = (q << (2 * np.arange(4))).sum(axis=2).astype(np.uint8)
    return np.concatenate([_f16_bytes(d), packed], axis=1)


_TQ1_FIRST = (np.arange(32)[:, None] + 32 * np.arange(5)[None, :])          # bytes 0-31: 5 trits each
_TQ1_SECOND = 160 + (np.arange(16)[:, None] + 16 * np.arange(5)[None, :])   # bytes 32-47
_TQ1_HIGH = 240 + (np.arange(4)[:, None] + 4 * np.arange(4)[None, :])       # qh 0-3: 4 trits, then x3


def _tq1_0(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=1, keepdims=True)
    t = _lround(x * _inverse(d)) + 1  # 0, 1, 2

    def pack(idx: np.ndarray, pad: bool) -> np.ndarray:
        q = np.zeros((len(x), idx.shape[0]), np.int64)
        for n in range(idx.shape[1]):  # the first trit most significant
            q = q * 3 + t[:, idx[:, n]]
        if pad:
            q = q * 3
        return ((q * 256 + 242) // 243).astype(np.uint8)  # ceiling division into a byte

    return np.concatenate([pack(_TQ1_FIRST, False), pack(_TQ1_SECOND, False), pack(_TQ1_HIGH, True),
                           _f16_bytes(d)], axis=1)


def _tq2_0(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=1, keepdims=True)
    t = (_lround(x * _inverse(d)) + 1) & 3
    chunks = t.reshape(len(x), 2, 4, 32)  # 128 elements per 32 bytes: element m + 32n in bits 2n
    packed = (chunks << (2 * np.arange(4))[None, None, :, None]).sum(axis=2).reshape(len(x), 64).astype(np.uint8)
    return np.concatenate([packed, _f16_bytes(d)], axis=1)


def _q8_k(x: np.ndarray) -> np.ndarray:
    mx = _first_abs_max(x)
    zero = (mx == 0).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = np.where(mx != 0, F32(-127) / np.where(mx != 0, mx, F32(1)), F32(0)).astype(F32)
    # nearest_int: float32 + 1.5 * 2^23, the low mantissa bits: round to nearest, ties to even
    q = np.minimum(127, np.rint((iscale * x).astype(np.float64)).astype(np.int64))
    q[zero] = 0
    bsums = q.reshape(len(x), 16, 16).sum(axis=2).astype("<i2")
    with np.errstate(divide="ignore"):
        d = np.where(zero[:, None], F32(0), F32(1) / np.where(zero[:, None], F32(1), iscale)).astype("<f4")
    return np.concatenate([d.view(np.uint8).reshape(len(x), 4), q.astype(np.int8).view(np.uint8),
                           bsums.view(np.uint8).reshape(len(x), 32)], axis=1)


REFERENCE_QUANTIZERS = {"Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0,
                        "MXFP4": _mxfp4, "NVFP4": _nvfp4, "Q1_0": _q1_0, "Q2_0": _q2_0, "TQ1_0": _tq1_0,
                        "TQ2_0": _tq2_0, "Q8_K": _q8_k}


def quantize_ref(type_name: str, x: np.ndarray) -> np.ndarray:
    """ggml's reference quantization of float32 ``x`` (rows of whole blocks): (blocks, bytes per block) uint8."""
    t = ggml.BY_NAME.get(type_name)
    if t is None or type_name not in REFERENCE_QUANTIZERS:
        raise ValueError(f"{type_name}: fmtsim reproduces ggml's reference quantizers for "
                         f"{', '.join(REFERENCE_QUANTIZERS)}; the K- and I-quants are made by a search "
                         "(make_qkx2_quants, the grid searches), which it does not reproduce")
    x = np.ascontiguousarray(x, dtype=F32)
    if x.size % t.block:
        raise ValueError(f"{x.size} values are not a whole number of {t.block}-element {type_name} blocks")
    if np.isnan(x).any():
        raise ValueError(f"{type_name}: NaN inputs are not modelled (first at flat index "
                         f"{int(np.flatnonzero(np.isnan(x.reshape(-1)))[0])})")
    blocks = x.reshape(-1, t.block)
    with np.errstate(over="ignore", invalid="ignore"):
        out = REFERENCE_QUANTIZERS[type_name](blocks)
    assert out.shape == (len(blocks), t.nbytes), (type_name, out.shape)
    return out
