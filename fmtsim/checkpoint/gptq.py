"""GPTQ checkpoints (as gptqmodel and AutoGPTQ write them): 2, 3, 4 and 8 bits, act-order ``g_idx``,
symmetric or not, the v1 and v2 zero-point conventions; the exact value of every weight.

A layer ``L`` (record ``gptq``; ``quantization_config.quant_method: gptq``):

- ``L.qweight`` I32 [in * bits / 32, out]: for every output column, the input rows' codes (0 .. 2^bits
  - 1) as one little-endian bit string down the column, row i at bits i * bits (so 3-bit codes cross
  int32 words: 32 codes per 3 words);
- ``L.qzeros`` I32 [groups, out * bits / 32]: the zero points, packed the same way along each row;
  checkpoint_format ``gptq`` (v1, the default) stores every zero point minus 1 (AutoGPTQ's
  convention: a stored 7 means 8; for 2, 4 and 8 bits the 1 is taken from the whole word, so a zero
  point of 0 borrows from its neighbour: :func:`v1_zero_points`), ``gptq_v2`` stores it as it is;
- ``L.scales`` F16 [groups, out]; ``L.g_idx`` I32 [in]: the group of each input row (``i // group_size``
  unless the model was quantized with ``desc_act``, act-order, which permutes it).

Value: ``w[j, i] = scales[g, j] * (q[i, j] - z[g, j])`` with g = g_idx[i]; fmtsim forms it exactly
(an at most 9-bit integer times a float16: exact in float64) and rounds once to the target. The
scales are float16 whatever the model's dtype. gptqmodel 7.7 (``TorchLinear.dequantize_weight``)
multiplies in the dtype the model is loaded in: float16 gives that exact product rounded once
(``dequantize --dtype float16``'s bits); a bfloat16 load first rounds each float16 scale to bfloat16,
so its bfloat16 weights are bf16(bf16(scale) * (q - z)), two roundings (the fixture test holds them
to that model), not ``dequantize --dtype bfloat16``'s one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .files import CheckpointError
from .intcodes import dense_words, unpack_dense

__all__ = ["gptq_act_order", "gptq_scales_per_weight", "GPTQ_BITS", "gptq_layout", "gptq_values", "gptq_codes",
           "v1_zero_points", "V1_WORD_OFFSET"]

GPTQ_BITS = (2, 3, 4, 8)


def gptq_layout(configs: dict[str, Any], where: str) -> tuple[int, bool]:
    """(bits, zero points stored minus 1) from config.json's quantization_config (or quantize_config.json)."""
    qc = _qc(configs)
    bits = qc.get("bits")
    if bits not in GPTQ_BITS:
        raise CheckpointError(f"{where}: bits is {bits!r} in config.json's quantization_config (or "
                              f"quantize_config.json); GPTQ packs {GPTQ_BITS} bits and the width is only in the config")
    fmt = str(qc.get("checkpoint_format", "gptq")).lower()
    if fmt not in ("gptq", "gptq_v2"):
        raise CheckpointError(f"{where}: checkpoint_format {fmt!r}: fmtsim reads GPTQ's 'gptq' (v1) and 'gptq_v2' "
                              "layouts (other formats, e.g. marlin or bitblas, repack the codes)")
    return int(bits), fmt == "gptq"


def _qc(configs: dict[str, Any]) -> dict[str, Any]:
    """config.json's quantization_config over AutoGPTQ's quantize_config.json (older models keep only that)."""
    side = configs.get("quantize_config.json")
    main = (configs.get("config.json") or {}).get("quantization_config")
    return {**(side if isinstance(side, dict) else {}), **(main if isinstance(main, dict) else {})}


def gptq_act_order(configs: dict[str, Any]) -> bool:
    """Whether the config says desc_act (act-order): g_idx then permutes the groups."""
    return bool(_qc(configs).get("desc_act"))


def gptq_codes(qweight: np.ndarray, bits: int, rows: int) -> np.ndarray:
    """Unsigned codes [rows (in), out] from qweight [rows * bits / 32, out]."""
    if qweight.ndim != 2 or qweight.shape[0] != dense_words(rows, bits):
        raise CheckpointError(f"qweight {list(qweight.shape)} does not hold {rows} rows of {bits}-bit codes")
    return unpack_dense(qweight, bits, rows, packed_dim=0) + (1 << (bits - 1))


# v1 stores every zero point minus 1. For 2, 4 and 8 bits AutoGPTQ / gptqmodel subtract it from the
# whole int32 word (0x11111111 for 4 bits), so a zero point of 0 borrows from the field above; loading
# adds the same constant to the word (gptqmodel 7.7 ``convert_gptq_v2_to_v1_format_module`` and back).
# 3-bit fields straddle words, and there the -1 and +1 are per field, modulo 8.
V1_WORD_OFFSET = {2: 0x55555555, 4: 0x11111111, 8: 0x01010101}


def v1_zero_points(qzeros: np.ndarray, bits: int, out: int) -> np.ndarray:
    """Zero points [groups, out] of a v1 (checkpoint_format gptq) qzeros tensor."""
    if bits == 3:
        return (unpack_dense(qzeros, 3, out, packed_dim=1) + 4 + 1) % 8
    words = (np.ascontiguousarray(qzeros).view(np.uint32).astype(np.uint64) + V1_WORD_OFFSET[bits]) & 0xFFFFFFFF
    return unpack_dense(words.astype(np.uint32), bits, out, packed_dim=1) + (1 << (bits - 1))


def _groups(g_idx: np.ndarray | None, in_features: int, groups: int, group_size: int | None) -> np.ndarray:
    if g_idx is None:
        return np.arange(in_features) // (group_size or -(-in_features // groups))
    g = np.asarray(g_idx).reshape(-1).astype(np.int64)
    if g.size != in_features:
        raise CheckpointError(f"g_idx has {g.size} entries for {in_features} input rows")
    return g


def gptq_scales_per_weight(scales: np.ndarray, g_idx: np.ndarray | None, in_features: int,
                           group_size: int | None = None) -> np.ndarray:
    """The float64 scale of every weight [out, in]: scales[g_idx[i], j]."""
    return scales.astype(np.float64)[_groups(g_idx, in_features, scales.shape[0], group_size), :].T


def gptq_values(qweight: np.ndarray, qzeros: np.ndarray, scales: np.ndarray, g_idx: np.ndarray | None,
                bits: int, zeros_minus_one: bool, in_features: int, group_size: int | None = None) -> np.ndarray:
    """Exact float64 weights [out, in]."""
    out = qweight.shape[1]
    q = gptq_codes(qweight, bits, in_features)  # [in, out]
    groups = scales.shape[0]
    if scales.ndim != 2 or scales.shape[1] != out:
        raise CheckpointError(f"scales {list(scales.shape)}: one row of {out} per group expected")
    if qzeros.ndim != 2 or qzeros.shape != (groups, dense_words(out, bits)):
        raise CheckpointError(f"qzeros {list(qzeros.shape)}: [{groups}, {dense_words(out, bits)}] expected for "
                              f"{groups} groups of {out} {bits}-bit zero points")
    z = v1_zero_points(qzeros, bits, out) if zeros_minus_one else \
        unpack_dense(qzeros, bits, out, packed_dim=1) + (1 << (bits - 1))
    g = _groups(g_idx, in_features, groups, group_size)
    if g.min() < 0 or g.max() >= groups:
        raise CheckpointError(f"g_idx names group {int(g.max() if g.max() >= groups else g.min())}; the scales "
                              f"hold {groups}")
    w = (q - z[g, :]).astype(np.float64) * scales.astype(np.float64)[g, :]
    return w.T.copy()
