"""``fmtsim checkpoint dequantize``: every quantized tensor a producer record matches becomes
BF16, F16 or F32 holding the exact product (codes x block scale x global scale, or the exact
quotient for a divisor global scale) rounded once, to nearest even, to the target dtype.

How it stays exact and fast: the value of a code under one scale is a small table. For FP8,
one 256-entry table per block of codes (its scale times each code's value); for FP4 (MXFP4,
NVFP4), one 65536-entry table per tensor indexed by (scale byte, packed byte) that yields the
two output values of the byte at once. A table entry is computed in float64 (every product
here is exact in 53 bits: E4M3 x F32 needs 28, E2M1 x UE4M3 x F32 needs 30) and rounded to the
target through round-to-odd float32 (an odd last bit remembers the discarded bits, so the
second rounding to BF16 or F16 is the one correct rounding: ml_dtypes' own float64 -> bfloat16
cast rounds twice). A divisor global scale (compressed-tensors NVFP4: w = e2m1 * s / g) is
divided in float64 and the sign of the exact remainder (an error-free product) decides the
sticky bit. Elements are then one gather per code or per byte.

Output layout: a tensor ``L.weight`` (or ``L.weight_packed``: renamed ``L.weight``; gpt-oss
``L_blocks`` [..., G, 16] -> ``L`` [..., G * 32], the layout gpt-oss' own ``weights.py`` returns;
compressed-tensors W4A16 -> ``weight_shape``) in the target dtype; its scales, global scale,
zero point and shape tensor, and the activation scales the record lists, are dropped; every
other tensor is copied byte for byte. The index is rewritten, ``quantization_config`` is
removed from config.json (kept under ``fmtsim_dequantized``), ``hf_quant_config.json`` is left
out, the other files are copied.

Float32 targets: the product is exact in float32 wherever it is representable; the others are
rounded once and counted (``rounded``). Overflow to Inf (F16) is counted too.

Safety as the FNUZ converter: one output file per shard, written to a temporary name, its
data's CRC-32 recorded in its header; a re-run keeps an output only when the source
fingerprint and options match and the recorded checksum matches the data on disk.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import __version__
from ..argcheck import path as check_path
from ..codec import decode
from ..exactfloat import two_product
from ..formats import get_format
from .bnb import bnb4_absmax, bnb4_state, bnb4_values, bnb8_values
from .files import (
    INDEX_NAME,
    CheckpointError,
    Entry,
    Header,
    ShardWriter,
    Source,
    check_output,
    check_paths,
    copy_side_files,
    crosscheck,
    find_source,
    header_bytes,
    make_output_dir,
    read_array,
    read_header,
    read_headers,
    remove_stale_temps,
    run_shards,
)
from .gptq import gptq_act_order, gptq_layout, gptq_scales_per_weight, gptq_values
from .hub_layouts import (
    awq_gemv_fast_values,
    awq_gemv_values,
    awq_marlin_values,
    hqq_library,
    hqq_values,
    linear_shape_from_config,
    quanto_library,
    quanto_values,
    torchao_kind,
    torchao_library,
    torchao_values,
)
from .intcodes import DENSE_BITS, check_zero_point, dense_words, group_layout, int_values, unpack_fp6
from .producers import Detection, LayerMatch, codes_without_scales, detect, read_configs, unread_layout

__all__ = ["TARGETS", "dequantize", "DequantSummary", "round_to_target", "layer_plan", "block_shape",
           "BlockShapeError"]

META_KEY = "fmtsim_dequantize"
ARITHMETICS = ("exact", "library")
HQQ_NEEDS = (".zero", ".shape", ".packing", ".group_size", ".axis")  # beside W_q and scale
TARGETS: dict[str, tuple[str, np.dtype, np.dtype]] = {
           "bfloat16": ("BF16", np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16)),
           "float16": ("F16", np.dtype(np.float16), np.dtype(np.uint16)),
           "float32": ("F32", np.dtype(np.float32), np.dtype(np.uint32))}
FP8_ELEMENT = {"F8_E4M3": "e4m3", "F8_E5M2": "e5m2", "F8_E4M3FNUZ": "e4m3fnuz", "F8_E5M2FNUZ": "e5m2fnuz"}
ROWS_PER_CHUNK_BYTES = 1 << 18  # input bytes per step: bounded memory, the work stays in L2 (measured)


# ---- one correct rounding ----------------------------------------------------------------


def _round_to_odd_f32(x: np.ndarray, sticky: np.ndarray | None = None) -> np.ndarray:
    """float64 ``x`` (plus a remainder below it whose sign is ``sticky``) -> float32 rounded to odd:
    truncated toward zero, last bit set when anything was discarded."""
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    back = f.astype(np.float64)
    finite = np.isfinite(x)
    lost = finite & (back != x)
    away = finite & (np.abs(back) > np.abs(x))  # RNE went away from zero: step back one code
    if sticky is not None:
        at = finite & (back == x) & (sticky != 0)  # x fits; the remainder decides
        away |= at & (np.sign(sticky) == -np.sign(x))
        lost |= at
    bits = f.view(np.uint32).copy()
    bits -= away.astype(np.uint32)
    bits |= lost.astype(np.uint32)
    return bits.view(np.float32)


def round_to_target(x: np.ndarray, target: str, sticky: np.ndarray | None = None) -> np.ndarray:
    """Exact float64 values (``x``, plus the sign of a remainder below float64 precision in
    ``sticky``) rounded once, to nearest even, to ``target`` (bfloat16 | float16 | float32)."""
    dt = TARGETS[target][1]
    x = np.asarray(x, dtype=np.float64)
    if target == "float32" and sticky is None:
        with np.errstate(over="ignore"):
            return x.astype(np.float32)
    if target == "float32":
        assert sticky is not None
        # x already the nearest float64; a remainder matters only at an exact float32 midpoint
        odd = _round_to_odd_f64(x, sticky)
        with np.errstate(over="ignore"):
            return odd.astype(np.float32)
    f = _round_to_odd_f32(x, sticky)
    with np.errstate(over="ignore"):
        return f.astype(dt)


def _round_to_odd_f64(x: np.ndarray, sticky: np.ndarray) -> np.ndarray:
    """x (a float64 nearest to the exact value) -> the float64 rounded to odd."""
    bits = x.view(np.uint64).copy()
    inexact = np.isfinite(x) & (sticky != 0)
    below = inexact & (np.sign(sticky) == -np.sign(x))  # exact value is nearer zero than x
    bits -= (below & ((bits & 1) == 0)).astype(np.uint64)  # step toward zero onto an odd code
    up = inexact & ~below & ((bits & 1) == 0)
    bits += up.astype(np.uint64)
    return bits.view(np.float64)


def divide_exactly(a: np.ndarray, g: float) -> tuple[np.ndarray, np.ndarray]:
    """q = a / g to nearest float64 and the sign of a - q*g (the part of a/g below q)."""
    a = np.asarray(a, dtype=np.float64)
    gv = np.full_like(a, g)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = a / gv
        p, e = two_product(q, gv)
        r = (a - p) - e
    r = np.where(np.isfinite(q), r, 0.0)
    return q, np.sign(r) * np.sign(gv)


# ---- tables --------------------------------------------------------------------------------


def _bits(values: np.ndarray, target: str, sticky: np.ndarray | None = None) -> np.ndarray:
    return round_to_target(values, target, sticky).view(TARGETS[target][2])


@cache
def _e2m1() -> np.ndarray:
    return np.asarray(decode(np.arange(16, dtype=np.uint8), "e2m1", np.float64))


@cache
def _scale_values(fmt: str) -> np.ndarray:
    if fmt == "ue5m3":
        return ue5m3_values()
    return np.asarray(decode(np.arange(256, dtype=np.uint8), fmt, np.float64))


@cache
def ue5m3_values() -> np.ndarray:
    """The value of each UE5M3 byte, AMD Quark's block-scale format (amdfp4 schemes): no sign, 5 exponent
    bits with bias 15, 3 mantissa bits, subnormals at exponent 0, 0xFF NaN, no infinity (Quark 0.13
    ``torch/kernel/float8_e5m3/lookup.py``)."""
    b = np.arange(256)
    e, m = b >> 3, b & 7
    v = np.where(e == 0, np.ldexp(m.astype(np.float64), -14 - 3), np.ldexp((8 + m).astype(np.float64), e - 15 - 3))
    v[0xFF] = np.nan
    return v


def _pair_table(single: np.ndarray, target: str) -> np.ndarray:
    """[256 scale, 16 code] target bits -> [65536] (scale << 8 | byte) -> both outputs of the byte."""
    wide = np.uint32 if TARGETS[target][2].itemsize == 2 else np.uint64
    shift = 16 if wide is np.uint32 else 32
    lo = single[:, np.arange(256) & 0xF].astype(wide)
    hi = single[:, np.arange(256) >> 4].astype(wide)
    return (lo | (hi << wide(shift))).reshape(-1)


@lru_cache(maxsize=8)
def _mxfp4_table(target: str) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore"):
        vals = _scale_values("e8m0")[:, None] * _e2m1()[None, :]
    bits = _bits(vals, target)
    return _pair_table(bits, target), _flags(vals, None, bits, target)


def _nvfp4_table(g: float, direction: str, target: str, scale_fmt: str = "e4m3") -> tuple[np.ndarray, np.ndarray]:
    # the stored tensor is F8_E4M3: a set sign bit (a negative scale, a lint finding) is read as loaders read it;
    # Quark's amdfp4 stores UE5M3 block scales instead (with or without a global multiplier)
    with np.errstate(invalid="ignore"):
        block = _scale_values(scale_fmt)[:, None] * _e2m1()[None, :]  # exact
    if direction == "multiplier":
        with np.errstate(invalid="ignore", over="ignore"):
            vals = block * np.float64(g)  # exact: 2 + 4 + 24 significant bits
        bits = _bits(vals, target)
        return _pair_table(bits, target), _flags(vals, None, bits, target)
    q, sticky = divide_exactly(block, float(g))
    bits = _bits(q, target, sticky)
    return _pair_table(bits, target), _flags(q, sticky, bits, target)


def _flags(vals: np.ndarray, sticky: np.ndarray | None, bits: np.ndarray, target: str) -> np.ndarray:
    """Per [scale, code] entry: 1 NaN, 2 overflow to Inf, 4 rounded (float32 target only)."""
    out = TARGETS[target][1]
    got = bits.view(out).astype(np.float64)
    finite = np.isfinite(vals)
    f = np.isnan(got).astype(np.uint8)
    f |= (finite & np.isinf(got)).astype(np.uint8) << 1
    if target == "float32":
        inexact = finite & np.isfinite(got) & ((got != vals) | ((sticky != 0) if sticky is not None else False))
        f |= inexact.astype(np.uint8) << 2
    return f


def _pair_flags(single: np.ndarray, target: str) -> np.ndarray | None:
    """[256, 16] flags -> [65536] flags of both nibbles (low nibble bits 0-2, high nibble bits 3-5)."""
    if not single.any():
        return None
    lo = single[:, np.arange(256) & 0xF]
    hi = single[:, np.arange(256) >> 4]
    return (lo | (hi << 3)).reshape(-1).astype(np.uint8)


# ---- planning ------------------------------------------------------------------------------


@dataclass
class TensorJob:
    """How one codes tensor becomes one output tensor."""

    match: LayerMatch
    out_name: str
    out_shape: tuple[int, ...]
    codes_dtype: str
    scale_shape: tuple[int, ...]
    block: tuple[int, int] | None = None  # FP8: rows x cols one scale covers
    block_source: str = ""  # where a 2-D block shape came from (a config key, the record, or inferred)
    bits: int = 0  # GPTQ: bits per code (from the config)
    zero_offset: int = 0  # GPTQ v1: added to every stored zero point (AutoGPTQ stored zero - 1)
    qtype: str = ""  # optimum-quanto: the layer's weights type from quanto_qmap.json


def _out_name(m: LayerMatch) -> str:
    p = m.producer
    if p.codes in ("_blocks", ".blocks"):
        return m.layer
    return m.layer + ".weight"


class BlockShapeError(CheckpointError):
    """The block shape of a block scale is unknown, ambiguous, or does not fit the scale's shape."""


def _declared(obj: Any, dotted: str) -> list[tuple[str, Any, Any]]:
    """(key path, value, the '*' entry it sits in or None) for a dotted key; a '*' part stands for
    every entry of that object (compressed-tensors' config_groups)."""
    head, star, tail = dotted.partition(".*.")
    node: Any = obj
    for k in head.split("."):
        node = node.get(k) if isinstance(node, dict) else None
    if not star:
        return [(dotted, node, None)] if node is not None else []
    out = []
    for g, entry in sorted(node.items()) if isinstance(node, dict) else []:
        val: Any = entry
        for k in tail.split("."):
            val = val.get(k) if isinstance(val, dict) else None
        out.append((f"{head}.{g}.{tail}", val, entry))
    return out


def _group_applies(group: Any, layer: str) -> bool | None:
    """Does a compressed-tensors config group target this layer? None: its targets say nothing fmtsim
    can match (a class name other than Linear). Targets are module names, "re:" regexes or class names,
    matched as compressed-tensors 0.19 ``utils/match.py`` ``match_name`` does (``re.match`` for "re:",
    equality otherwise)."""
    if not isinstance(group, dict) or not isinstance(group.get("targets"), list):
        return None
    known = False
    for t in group["targets"]:
        if not isinstance(t, str):
            continue
        if t == "Linear":  # every quantized weight fmtsim reads belongs to a Linear module
            return True
        if t.startswith("re:"):
            known = True
            try:
                if re.match(t[3:], layer):
                    return True
            except re.error:
                return None
        elif "." in t or t == layer:
            known = True
            if t == layer:
                return True
    return False if known else None


def _fitting(n: int, count: int) -> tuple[int, int]:
    """The block lengths b (a range lo..hi, empty when lo > hi) with ceil(n / b) == count; every
    length >= n is the same single block, counted once as n."""
    if count == 1:
        return (n, n)
    if count < 1 or count > n:
        return (1, 0)
    return (-(-n // count), min(n - 1, -(-n // (count - 1)) - 1))


def block_shape(m: LayerMatch, codes: tuple[int, int], scale: tuple[int, ...], configs: dict[str, Any]
                ) -> tuple[tuple[int, int], str]:
    """The (rows, cols) block of a 2-D block scale and where it came from: the key the producer writes
    it under (the record's ``block_keys``), else the record's fixed block, else inferred from the scale's
    shape only when exactly one block shape fits it. Anything else is a CheckpointError: never a guess.

    compressed-tensors 0.19 (checked in its source): FP8_BLOCK keeps ``block_structure`` in each config
    group's weight ``QuantizationArgs``; ``quantization/lifecycle/initialize.py`` sizes the scale
    [ceil(rows / b0), ceil(cols / b1)], and ``compressors/naive_quantized/base.py`` pads the weight to
    whole blocks before quantizing and cuts the codes back, so the last blocks are partial. A 320-wide
    layer under 128x128 blocks has 3 scale columns, which 107..159-wide blocks would fit as well."""
    p = m.producer
    where = f"{m.codes} ({p.name})"
    declared: dict[tuple[int, int], list[str]] = {}
    for file, dotted in p.block_keys:
        for key, val, group in _declared(configs.get(file), dotted):
            if val is None:
                continue
            if not (isinstance(val, list) and len(val) == 2 and all(type(v) is int and v > 0 for v in val)):
                raise BlockShapeError(f"{where}: {file} {key} is {val!r}; a block shape is two positive integers")
            if group is not None and _group_applies(group, m.layer) is False:
                continue  # a config group that targets other layers
            declared.setdefault((val[0], val[1]), []).append(f"{file} {key}")
    if len(declared) == 1:
        (b, keys), = declared.items()
        return b, f"from {keys[0]}"
    if len(declared) > 1:
        fits = [b for b in declared if scale == (-(-codes[0] // b[0]), -(-codes[1] // b[1]))]
        shapes = ", ".join(f"{b[0]}x{b[1]} ({declared[b][0]})" for b in declared)
        if len(fits) == 1:
            return fits[0], f"from {declared[fits[0]][0]}: of the block shapes the config declares ({shapes}), " \
                f"the only one that fits the scale's shape"
        raise BlockShapeError(f"{where}: the config declares block shapes {shapes} and {len(fits)} of them fit "
                              f"scale {m.scale} {list(scale)}; cannot tell which this layer uses")
    if p.block is not None:
        return p.block, f"the {p.name} record's fixed {p.block[0]}x{p.block[1]} (no block shape in the config)"
    (r_lo, r_hi), (c_lo, c_hi) = _fitting(codes[0], scale[0]), _fitting(codes[1], scale[1])
    if r_lo == r_hi and c_lo == c_hi:
        return (r_lo, c_lo), (f"inferred from the scale's shape: {r_lo}x{c_lo} is the only block shape that "
                              f"gives {list(scale)} scales over {list(codes)}")
    if r_lo > r_hi or c_lo > c_hi:
        raise BlockShapeError(f"{where}: scale {m.scale} {list(scale)} cannot cover {list(codes)} in any blocks")
    read = "; ".join(f"{f} {k}" for f, k in p.block_keys) or "none"

    def span(lo: int, hi: int) -> str:
        return str(lo) if lo == hi else f"{lo}..{hi}"

    raise BlockShapeError(f"{where}: unknown block shape: scale {m.scale} {list(scale)} over {list(codes)} fits "
                          f"blocks of {span(r_lo, r_hi)} rows x {span(c_lo, c_hi)} columns and no config says "
                          f"which (keys this record reads: {read}); refusing to guess")


def layer_plan(m: LayerMatch, entries: dict[str, Entry], configs: dict[str, Any],
               read: Callable[[str], np.ndarray] | None = None) -> TensorJob:
    """Shapes and block geometry of one match, checked against its record; CheckpointError if not.
    ``read`` (a tensor name -> its array) lets a shape tensor (compressed-tensors ``weight_shape``)
    give the unpacked shape; without it the packed words are taken as full."""
    p = m.producer
    c, s = entries[m.codes], entries[m.scale]
    where = f"{m.codes} ({p.name})"
    if p.refuse:
        raise CheckpointError(f"{where}: {p.title}: {p.refuse}; refused, not read")
    if p.scheme == "bnb4":
        _, state = bnb4_state(m.layer, entries, read)
        n_bytes = int(np.prod(c.shape, dtype=np.int64))
        if n_bytes != -(-state.elements // 2):
            raise CheckpointError(f"{where}: {n_bytes} code bytes; the quant_state's shape {list(state.shape)} "
                                  f"needs {-(-state.elements // 2)}")
        return TensorJob(m, _out_name(m), state.shape, c.dtype, s.shape, (1, state.blocksize))
    if p.scheme == "gptq":
        bits, minus_one = gptq_layout(configs, where)
        if m.layer + ".g_idx" not in entries and gptq_act_order(configs):
            raise CheckpointError(f"{where}: no {m.layer}.g_idx, and the config says desc_act (act-order): the "
                                  "group of each input row is only in g_idx")
        if len(c.shape) != 2 or (c.shape[0] * 32) % bits or len(s.shape) != 2 or s.shape[1] != c.shape[1]:
            raise CheckpointError(f"{where}: qweight {list(c.shape)} and scales {list(s.shape)} are not "
                                  f"[in * {bits} / 32, out] and [groups, out]")
        rows = c.shape[0] * 32 // bits
        return TensorJob(m, _out_name(m), (c.shape[1], rows), c.dtype, s.shape, (1, -(-rows // s.shape[0])),
                         bits=bits, zero_offset=1 if minus_one else 0)
    if p.scheme == "quanto":
        qmap = configs.get("quanto_qmap.json") or {}
        qtype = str((qmap.get(m.layer) or {}).get("weights", "")) if isinstance(qmap, dict) else ""
        if not qtype:
            raise CheckpointError(f"{where}: quanto_qmap.json names no weights type for {m.layer}")
        if c.dtype != "U8":
            return TensorJob(m, _out_name(m), c.shape, c.dtype, s.shape, qtype=qtype)
        if m.zero_point is None:
            raise CheckpointError(f"{where}: no {m.layer}.weight._shift: quanto's {qtype} codes need their shift "
                                  "(w = q * scale - shift)")
        groups, width = int(np.prod(s.shape, dtype=np.int64)), c.shape[-1]
        dims = linear_shape_from_config(m.layer, configs.get("config.json"))
        if dims is None or dims[0] * dims[1] != groups * width:
            raise CheckpointError(f"{where}: quanto stores no shape for qint4/qint2 weights ({groups} groups of "
                                  f"{width} codes); fmtsim takes it from config.json for Llama-style projections "
                                  f"(q/k/v/o_proj, gate/up/down_proj) and cannot place {m.layer}")
        return TensorJob(m, _out_name(m), dims, c.dtype, s.shape, qtype=qtype)
    if p.scheme == "hqq":
        if read is None:  # pragma: no cover - every caller that plans an HQQ layer passes a reader
            raise CheckpointError(f"{where}: the HQQ shape tensor must be read to plan this layer")
        lacking = [m.layer + x for x in HQQ_NEEDS if m.layer + x not in entries]
        if lacking:
            raise CheckpointError(f"{where}: no {', '.join(lacking)} (HQQ writes them beside W_q; without them the "
                                  "codes cannot be placed)")
        shape = tuple(int(v) for v in read(m.layer + ".shape").reshape(-1))
        return TensorJob(m, _out_name(m), shape, c.dtype, s.shape)
    if p.scheme == "awq-gemv":
        group = _awq_group(configs, where)
        return TensorJob(m, _out_name(m), (c.shape[0], c.shape[1] * 8), c.dtype, s.shape, (1, group))
    if p.scheme == "awq-gemv-fast":
        return TensorJob(m, _out_name(m), (c.shape[0] * 4, c.shape[1]), c.dtype, s.shape,
                         (1, _awq_group(configs, where)))
    if p.scheme == "awq-marlin":
        return TensorJob(m, _out_name(m), (c.shape[1] // 2, c.shape[0] * 16), c.dtype, s.shape,
                         (1, _awq_group(configs, where)))
    if p.scheme == "torchao":
        if m.producer.global_scale is None and c.dtype == "U8" and s.dtype == "F8_E4M3" and \
                m.layer + "._weight_per_tensor_scale" not in entries:
            raise CheckpointError(f"{where}: NVFP4 codes with E4M3 block scales but no "
                                  f"{m.layer}._weight_per_tensor_scale (torchao writes it; reading 1 would give "
                                  "other values)")
        shape = (c.shape[0], c.shape[1] * 2) if c.dtype == "U8" else tuple(c.shape)
        return TensorJob(m, _out_name(m), shape, c.dtype, s.shape)
    if p.scheme == "bnb8":
        if len(c.shape) != 2 or s.shape not in ((c.shape[0],), (c.shape[0], 1)):
            raise CheckpointError(f"{where}: LLM.int8 needs a 2-D weight and one SCB per row; got {list(c.shape)} "
                                  f"and {list(s.shape)}")
        return TensorJob(m, _out_name(m), c.shape, c.dtype, s.shape, (1, c.shape[1]))
    if p.scheme == "fp8":
        if len(c.shape) != 2:
            raise CheckpointError(f"{where}: FP8 weights are 2-D, got {list(c.shape)}")
        rows, cols = c.shape
        n = int(np.prod(s.shape, dtype=np.int64))
        if n == 1:
            block = (rows, cols)
        elif s.shape in ((rows, 1), (rows,)):
            block = (1, cols)
        elif len(s.shape) == 4:
            block = _fp8_4d_block(where, m.scale, c.shape, s.shape)
        elif len(s.shape) == 2:
            block, source = block_shape(m, (rows, cols), s.shape, configs)
            if s.shape != (-(-rows // block[0]), -(-cols // block[1])):
                raise BlockShapeError(f"{where}: scale {m.scale} {list(s.shape)} does not cover {list(c.shape)} "
                                      f"in {block[0]}x{block[1]} blocks (the block shape {source})")
            return TensorJob(m, _out_name(m), c.shape, c.dtype, s.shape, block, source)
        else:
            raise CheckpointError(f"{where}: cannot tell how scale {m.scale} {list(s.shape)} covers {list(c.shape)}")
        return TensorJob(m, _out_name(m), c.shape, c.dtype, s.shape, block)
    if p.scheme in ("nvfp4", "mxfp4"):
        per = p.block[1] if p.block else _fp4_group(where, c.shape, s.shape, configs)
        if p.codes in ("_blocks", ".blocks"):
            if len(c.shape) < 2 or c.shape[-1] != per // 2 or c.shape[:-1] != s.shape:
                raise CheckpointError(f"{where}: blocks {list(c.shape)} and scales {list(s.shape)} do not fit "
                                      f"[..., G, {per // 2}] / [..., G]")
            out_shape = (*c.shape[:-2], c.shape[-2] * per)
        else:
            out_shape = (*c.shape[:-1], c.shape[-1] * 2)
            want = (*c.shape[:-1], out_shape[-1] // per)
            if out_shape[-1] % per or s.shape != want:
                raise CheckpointError(f"{where}: scale {m.scale} is {list(s.shape)}; {list(c.shape)} packed FP4 "
                                      f"needs {list(want)} (one per {per} values; swizzled scales are not read)")
        if m.global_scale is not None and int(np.prod(entries[m.global_scale].shape, dtype=np.int64)) != 1:
            raise CheckpointError(f"{where}: global scale {m.global_scale} has {list(entries[m.global_scale].shape)} "
                                  "elements; one per tensor is expected")
        return TensorJob(m, _out_name(m), out_shape, c.dtype, s.shape, (1, per))
    if p.packing in DENSE_BITS:
        return _dense_plan(m, entries, configs, where, read)
    if p.packing == "fp6":  # Quark MXFP6: [out, in * 3/4] bytes, one E8M0 scale per 32
        if len(c.shape) != 2 or c.shape[1] % 3:
            raise CheckpointError(f"{where}: FP6 weights are 2-D with whole 3-byte groups, got {list(c.shape)}")
        cols = c.shape[1] // 3 * 4
        if cols % 32 or s.shape != (c.shape[0], cols // 32):
            raise CheckpointError(f"{where}: scale {m.scale} is {list(s.shape)}; {list(c.shape)} FP6 bytes hold "
                                  f"[{c.shape[0]}, {cols}] codes and need [{c.shape[0]}, {cols // 32}] scales")
        return TensorJob(m, _out_name(m), (c.shape[0], cols), c.dtype, s.shape, (1, 32))
    if p.packing in INT_PACKINGS:
        return _int_plan(m, entries, configs, where)
    raise CheckpointError(f"{where}: scheme {p.scheme} cannot be dequantized")  # pragma: no cover


def _awq_group(configs: dict[str, Any], where: str) -> int:
    qc = (configs.get("config.json") or {}).get("quantization_config") or {}
    group = qc.get("group_size")
    if not isinstance(group, int) or group <= 0:
        raise CheckpointError(f"{where}: quantization_config.group_size is {group!r}; AWQ GEMV's padded scales "
                              "do not say it")
    return group


def _fp4_group(where: str, codes: tuple[int, ...], scale: tuple[int, ...], configs: dict[str, Any]) -> int:
    """Values per block scale of a record without a fixed block (Quark amdfp4: 16 or 32): from the scale's
    shape, and it must be a group size the config names."""
    from .intcodes import config_group_sizes

    cols = codes[-1] * 2
    if len(scale) != len(codes) or not scale[-1] or cols % scale[-1]:
        raise CheckpointError(f"{where}: scale {list(scale)} does not cover {list(codes)} packed FP4 in whole groups")
    per = cols // scale[-1]
    named = config_group_sizes(configs)
    if named and per not in named:
        raise CheckpointError(f"{where}: scale {list(scale)} gives {per} values per scale; the config names "
                              f"group sizes {sorted(named)}")
    return per


def ct_layer_weights(layer: str, configs: dict[str, Any]) -> list[dict[str, Any]]:
    """The integer ``weights`` entries of the compressed-tensors config groups that target ``layer``
    (groups whose targets fmtsim cannot match count only when no group is known to target it)."""
    cfg = configs.get("config.json")
    qc = cfg.get("quantization_config") if isinstance(cfg, dict) else None
    groups = qc.get("config_groups") if isinstance(qc, dict) else None
    found: dict[bool | None, list[dict[str, Any]]] = {True: [], None: []}
    for g in (groups or {}).values() if isinstance(groups, dict) else ():
        w = g.get("weights") if isinstance(g, dict) else None
        if not isinstance(w, dict) or w.get("type") != "int" or type(w.get("num_bits")) is not int:
            continue
        applies = _group_applies(g, layer)
        if applies is not False:
            found[applies].append(w)
    return found[True] or found[None]


def ct_layer_bits(layer: str, configs: dict[str, Any]) -> set[int]:
    """The integer weights' num_bits the compressed-tensors config groups that target ``layer`` declare."""
    return {w["num_bits"] for w in ct_layer_weights(layer, configs)}


def _dense_plan(m: LayerMatch, entries: dict[str, Entry], configs: dict[str, Any], where: str,
                read: Callable[[str], np.ndarray] | None) -> TensorJob:
    """compressed-tensors pack-quantized (see intcodes): the bit width is the record's, and must be the
    one the config declares for the layer; ``weight_shape`` gives the row length and must fit the words."""
    p = m.producer
    bits = DENSE_BITS[p.packing]
    c, s = entries[m.codes], entries[m.scale]
    if len(c.shape) != 2:
        raise CheckpointError(f"{where}: pack-quantized weights are 2-D, got {list(c.shape)}")
    declared = ct_layer_bits(m.layer, configs)
    if declared - {bits}:
        raise CheckpointError(f"{where}: the config declares {'/'.join(map(str, sorted(declared)))}-bit integer "
                              f"weights for {m.layer}; the {p.name} record reads {bits}-bit codes (fmtsim reads "
                              f"pack-quantized with 4 and 8 bits)")
    rows, cols = c.shape[0], c.shape[1] * 32 // bits
    if m.shape_tensor and read is not None:
        shp = tuple(int(v) for v in np.asarray(read(m.shape_tensor)).reshape(-1))
        if len(shp) != 2 or shp[0] != rows or dense_words(shp[1], bits) != c.shape[1]:
            raise CheckpointError(f"{where}: {m.shape_tensor} says {list(shp)}; {list(c.shape)} int32 words hold "
                                  f"[{rows}, {c.shape[1] * 32 // bits - 32 // bits + 1}..{cols}] {bits}-bit codes")
        cols = shp[1]
    group = group_layout(p.packing, (rows, cols), s.shape, configs, where)
    _check_zero_point(m, entries, configs, (rows, cols), group, where)
    return TensorJob(m, _out_name(m), (rows, cols), c.dtype, s.shape, (1, group))


# integer codes decoded by intcodes (with "byte": int8); compressed-tensors' dense int32 packings too
INT_PACKINGS = ("byte", "int4-rows", "int4x8-reorder-t", "int4x8-reorder", *DENSE_BITS)


MODELOPT_FP8_BLOCK = 128  # FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG block_sizes {-1: 128, -2: 128} (ModelOpt 0.47 presets)


def _fp8_4d_block(where: str, scale: str, codes: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, int]:
    """ModelOpt FP8_2D_BLOCKWISE_WEIGHT_ONLY writes its scale [ceil(out/128), 1, ceil(in/128), 1] (the
    weight padded to whole 128x128 blocks); the last blocks of a row or column may be partial."""
    rows, cols = codes
    b = MODELOPT_FP8_BLOCK
    if shape[1] != 1 or shape[3] != 1 or shape[0] != -(-rows // b) or shape[2] != -(-cols // b):
        raise CheckpointError(f"{where}: scale {scale} {list(shape)} is not [ceil(out/{b}), 1, ceil(in/{b}), 1] "
                              f"over {list(codes)}")
    return b, b


def _int_plan(m: LayerMatch, entries: dict[str, Entry], configs: dict[str, Any], where: str) -> TensorJob:
    p = m.producer
    if p.scheme not in ("int8", "w4a16", "w8a16"):
        raise CheckpointError(f"{where}: {p.packing} codes under scheme {p.scheme}")  # pragma: no cover
    c, s = entries[m.codes], entries[m.scale]
    if len(c.shape) != 2:
        raise CheckpointError(f"{where}: integer weights are 2-D, got {list(c.shape)}")
    if p.packing == "byte":
        out_shape = (c.shape[0], c.shape[1])
    elif p.packing == "int4-rows":
        out_shape = (c.shape[0] * 2, c.shape[1])
    elif p.packing == "int4x8-reorder":
        out_shape = (c.shape[0], c.shape[1] * 8)
    else:
        out_shape = (c.shape[1] * 8, c.shape[0])
    group = group_layout(p.packing, out_shape, s.shape, configs, where)
    if m.global_scale is not None and int(np.prod(entries[m.global_scale].shape, dtype=np.int64)) != 1:
        raise CheckpointError(f"{where}: global scale {m.global_scale} has {list(entries[m.global_scale].shape)} "
                              "elements; one per tensor is expected")
    _check_zero_point(m, entries, configs, out_shape, group, where)
    return TensorJob(m, _out_name(m), out_shape, c.dtype, s.shape, (1, group))


def _zero_point_required(m: LayerMatch, configs: dict[str, Any]) -> str:
    """Why the layer must have a zero point ('' when it need not): unsigned codes centre on one, and a
    compressed-tensors config group that targets the layer with ``symmetric: false`` packs one."""
    if m.producer.element == "uint4":
        return "its codes are unsigned (0..15 around a zero point)"
    if m.producer.packing in DENSE_BITS:
        for w in ct_layer_weights(m.layer, configs):
            if w.get("symmetric") is False:
                return "its config group says symmetric: false"
    return ""


def _check_zero_point(m: LayerMatch, entries: dict[str, Entry], configs: dict[str, Any], out_shape: tuple[int, int],
                      group: int, where: str) -> None:
    if m.producer.zero_point is None:
        return
    if m.zero_point is None:
        why = _zero_point_required(m, configs)
        if why:
            raise CheckpointError(f"{where}: no zero point {m.layer}{m.producer.zero_point}, and {why}; reading it "
                                  "with zero point 0 would shift every value")
        return
    z = entries[m.zero_point]
    check_zero_point(m.producer.packing, m.zero_point, z.dtype, tuple(z.shape), out_shape[0],
                     -(-out_shape[1] // group), where)


def _stream_int(job: _Job, tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry,
                emit: Callable[[Any], None], cache: dict[Path, Header], res: ShardResult,
                progress: Callable[[int], None] | None) -> None:
    """int8 / int4 layouts (see intcodes): exact values in float64, rounded once."""
    m, target = tj.match, job.target
    assert tj.block is not None
    zp = _read_named(job, m.zero_point, cache) if m.zero_point else None
    pre = _read_named(job, m.pre_scale, cache) if m.pre_scale else None
    glob = float(_read_named(job, m.global_scale, cache).astype(np.float64).reshape(-1)[0]) if m.global_scale else None
    vals64, sticky = int_values(m.producer.packing, read_array(src, h, e), scale, tj.block[1], zp, pre,
                                signed=m.producer.element != "uint4", cols=tj.out_shape[1], global_scale=glob)
    if vals64.shape != tuple(tj.out_shape):  # pragma: no cover - layer_plan checked the shapes
        raise CheckpointError(f"{e.name}: decoded {list(vals64.shape)}, expected {list(tj.out_shape)}")
    out_bits = _bits(vals64, target, sticky)
    res.values += out_bits.size
    got = out_bits.view(TARGETS[target][1]).astype(np.float64)
    res.nan += int(np.count_nonzero(np.isnan(got)))
    res.overflow += int(np.count_nonzero(np.isinf(got) & np.isfinite(vals64)))
    if target == "float32":
        inexact = (got != vals64) | ((sticky != 0) if sticky is not None else False)
        res.rounded += int(np.count_nonzero(np.isfinite(got) & inexact))
    emit(np.ascontiguousarray(out_bits).data)
    if progress:
        progress(e.nbytes)


def _emit_values(vals: np.ndarray, sticky: np.ndarray | None, target: str, res: ShardResult,
                 emit: Callable[[Any], None], progress: Callable[[int], None] | None, nbytes: int) -> None:
    """Float64 values (with the sign of any remainder below float64 in ``sticky``) rounded once to the target,
    counted (values, NaN, overflow, rounded) and written."""
    out_bits = _bits(vals, target, sticky)
    res.values += out_bits.size
    got = out_bits.view(TARGETS[target][1]).astype(np.float64)
    res.nan += int(np.count_nonzero(np.isnan(got)))
    res.overflow += int(np.count_nonzero(np.isinf(got) & np.isfinite(vals)))
    inexact = (got != vals) | ((sticky != 0) if sticky is not None else False)
    res.rounded += int(np.count_nonzero(np.isfinite(got) & inexact))
    emit(np.ascontiguousarray(out_bits).data)
    if progress:
        progress(nbytes)


def _stream_hub(job: _Job, tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry,
                emit: Callable[[Any], None], cache: dict[Path, Header], res: ShardResult,
                progress: Callable[[int], None] | None) -> None:
    """optimum-quanto, HQQ and torchao (hub_layouts.py): exact values, rounded once to the target."""
    m, target = tj.match, job.target
    p = m.producer

    def read(name: str) -> np.ndarray:
        if name not in job.where:
            raise KeyError(name)
        return _read_named(job, name, cache)

    codes = read_array(src, h, e)
    zp = read(m.zero_point) if m.zero_point else None
    library = job.options.get("arithmetic") == "library"
    sticky: np.ndarray | None = None
    if p.scheme == "quanto":
        if library:
            vals = quanto_library(tj.qtype, codes, scale, zp, tuple(tj.out_shape)).astype(np.float64)
        else:
            vals, sticky = quanto_values(tj.qtype, codes, scale, zp, tuple(tj.out_shape))
    elif p.scheme == "hqq":
        vals, sticky = (hqq_library(read, m.layer).astype(np.float64), None) if library else hqq_values(read, m.layer)
    elif p.scheme in ("awq-gemv", "awq-gemv-fast"):
        if zp is None:
            raise CheckpointError(f"{e.name}: no {m.layer}.qzeros (AWQ stores a zero point per group)")
        group = tj.block[1] if tj.block else 0
        vals, sticky = awq_gemv_values(codes, zp, scale, group) if p.scheme == "awq-gemv" else \
            awq_gemv_fast_values(codes, scale, zp, group)
    elif p.scheme == "awq-marlin":
        vals, sticky = awq_marlin_values(codes, scale, tj.block[1] if tj.block else 0)
    else:
        kind, attrs = torchao_kind(h.metadata, m.layer + ".weight")
        pts_name = m.layer + "._weight_per_tensor_scale"
        pts = read(pts_name) if pts_name in job.where else None
        if library:
            vals = torchao_library(kind, attrs, codes, scale, zp, pts).astype(np.float64)
        else:
            vals, sticky = torchao_values(kind, attrs, codes, scale, zp, pts)
    if vals.shape != tuple(tj.out_shape):
        raise CheckpointError(f"{e.name}: decoded {list(vals.shape)}, expected {list(tj.out_shape)}")
    _emit_values(vals, sticky, target, res, emit, progress, e.nbytes)


def _stream_gptq(job: _Job, tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry,
                 emit: Callable[[Any], None], cache: dict[Path, Header], res: ShardResult,
                 progress: Callable[[int], None] | None) -> None:
    """GPTQ (gptq.py): exact values in float64, rounded once to the target."""
    m, target = tj.match, job.target
    g_idx_name = m.layer + ".g_idx"
    g_idx = _read_named(job, g_idx_name, cache) if g_idx_name in job.where else None
    if m.zero_point is None:
        raise CheckpointError(f"{e.name}: no {m.layer}.qzeros: GPTQ stores a zero point per group and column")
    vals = gptq_values(read_array(src, h, e), _read_named(job, m.zero_point, cache), scale, g_idx, tj.bits,
                       tj.zero_offset == 1, tj.out_shape[1], tj.block[1] if tj.block else None)
    if job.options.get("arithmetic") == "library" and target == "bfloat16":
        # gptqmodel loaded in bfloat16: its float16 scales rounded to bfloat16 first, then the product
        s_el = gptq_scales_per_weight(scale, g_idx, tj.out_shape[1], tj.block[1] if tj.block else None)
        s_bf = s_el.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
        vals = (s_bf * (vals / s_el)).astype(np.float32).astype(np.float64)  # q - z exact; one product in f32
    _emit_values(vals, None, target, res, emit, progress, e.nbytes)


def _stream_bnb(job: _Job, tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry,
                emit: Callable[[Any], None], cache: dict[Path, Header], res: ShardResult,
                progress: Callable[[int], None] | None) -> None:
    """bitsandbytes: the library's float32 values (bnb.py), rounded once to the target."""
    m, target = tj.match, job.target
    if m.producer.scheme == "bnb8":
        vals = bnb8_values(read_array(src, h, e), scale)
    else:
        names = {n for n in job.where if n.startswith(m.layer + ".weight")}

        def read(name: str) -> np.ndarray:
            return _read_named(job, name, cache)
        _, state = bnb4_state(m.layer, {n: None for n in names}, read)
        nested = m.layer + ".weight.nested_quant_map"
        absmax = bnb4_absmax(state, scale, read(nested) if nested in names else None,
                             read(m.layer + ".weight.nested_absmax") if nested in names else None)
        quant_map = m.layer + ".weight.quant_map"
        if quant_map not in names:
            raise CheckpointError(f"{e.name}: no {quant_map} (the 16 values the codes index)")
        # --arithmetic library: what bitsandbytes' CPU kernel reads (its absmax by row blocks; bnb.py)
        cpu_rows = job.options.get("arithmetic") == "library" and state.shape[-1] % state.blocksize != 0 \
            and state.shape[-1] % 2 == 0
        vals = bnb4_values(state, read_array(src, h, e), read(quant_map), absmax, cpu_kernel_rows=cpu_rows)
    _emit_values(vals.astype(np.float64), None, target, res, emit, progress, e.nbytes)


# ---- computing -----------------------------------------------------------------------------


@dataclass
class ShardResult:
    shard: str
    skipped: bool = False
    redone: str = ""
    tensors: int = 0
    dequantized: int = 0
    dropped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    values: int = 0
    rounded: int = 0
    overflow: int = 0
    nan: int = 0
    seconds: float = 0.0


@dataclass
class _Job:
    shard: Path
    out_path: Path
    target: str
    tensors: dict[str, TensorJob]  # codes name -> job (codes in this shard)
    dropped: set[str]
    where: dict[str, Path]  # every tensor -> its shard (scales may live elsewhere)
    options: dict[str, Any]


def _read_named(job: _Job, name: str, cache: dict[Path, Header]) -> np.ndarray:
    shard = job.where[name]
    h = cache.get(shard) or read_header(shard)
    cache[shard] = h
    with open(shard, "rb") as fh:
        return read_array(fh, h, h.entries[name])


def _fingerprint(h: Header) -> str:
    st = h.path.stat()
    return hashlib.sha256(h.raw + f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()


class _Crc:
    """CRC-32 of everything written (finds flipped or lost bytes; 10x cheaper than SHA-256 here)."""

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: Any) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


def _data_checksum(path: Path) -> tuple[str, str]:
    """(recorded, actual) CRC-32 of an output file's data section."""
    h = read_header(path)
    meta = json.loads(h.metadata.get(META_KEY, "{}"))
    digest = _Crc()
    with open(path, "rb") as fh:
        fh.seek(h.data_start)
        while piece := fh.read(1 << 22):
            digest.update(piece)
    return str(meta.get("data_crc32", "")), digest.hexdigest()


def _fp8_specials(codes: np.ndarray, element: str, tmp: np.ndarray) -> tuple[int, int]:
    """(NaN codes, Inf codes) in a chunk, by bit masks (cheaper than a histogram)."""
    if element.endswith("fnuz"):
        return int(np.count_nonzero(codes == 0x80)), 0
    m = np.bitwise_and(codes, 0x7F, out=tmp[: codes.size].reshape(codes.shape))
    if element == "e4m3":
        return int(np.count_nonzero(m == 0x7F)), 0
    return int(np.count_nonzero(m > 0x7C)), int(np.count_nonzero(m == 0x7C))


def _stream_fp8(tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry, target: str,
                emit: Callable[[Any], None], res: ShardResult, progress: Callable[[int], None] | None) -> None:
    """One gather per code from a per-(row group, column block) table of the exact products, rounded once."""
    element = tj.match.element
    table = np.asarray(decode(np.arange(256, dtype=np.uint8), element, np.float64))
    rows, cols = e.shape
    assert tj.block is not None
    br, bc = tj.block
    s = np.asarray(scale, dtype=np.float64)
    s = s.reshape(1, 1) if s.size == 1 else s.reshape(rows, 1) if s.ndim == 1 else s
    ncb = s.shape[1]
    if s.shape[0] == 1:  # per tensor: one table, rows in ~1 MiB steps
        step, per_group = max(1, ROWS_PER_CHUNK_BYTES // max(cols, 1)), rows
    elif br == 1:  # per row: a table per row
        step = per_group = 1
        step = max(1, min(rows, ROWS_PER_CHUNK_BYTES // max(cols, 1), 4096))
    else:  # blocks: whole block rows per step
        step = br * max(1, ROWS_PER_CHUNK_BYTES // max(cols * br, 1))
        per_group = br
    groups_per_step = max(1, -(-step // per_group)) if s.shape[0] > 1 else 1
    lut_size = groups_per_step * ncb * 256
    idx_dtype = np.intp  # take() converts any other index type to intp first: build it in intp once
    del lut_size
    col_off = (np.arange(cols) // bc) * 256 if ncb > 1 else np.zeros(cols, np.int64)
    row_grp = np.arange(step) // per_group if s.shape[0] > 1 else np.zeros(step, np.int64)
    base = (row_grp[:, None] * (ncb * 256) + col_off[None, :]).astype(idx_dtype)
    idx_buf = np.empty((step, cols), idx_dtype)
    out_buf = np.empty((step, cols), TARGETS[target][2])
    tmp = np.empty(step * cols, np.uint8)
    table_nan = np.isnan(table)
    src.seek(h.data_start + e.begin)
    for r0 in range(0, rows, step):
        n = min(step, rows - r0)
        raw = src.read(n * cols)
        if len(raw) != n * cols:
            raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
        codes = np.frombuffer(raw, dtype=np.uint8).reshape(n, cols)
        g0 = r0 // per_group if s.shape[0] > 1 else 0
        g1 = (r0 + n - 1) // per_group + 1 if s.shape[0] > 1 else 1
        with np.errstate(invalid="ignore", over="ignore"):
            exact = s[g0:g1, :, None] * table[None, None, :]  # [groups, column blocks, 256], exact
        lut = _bits(exact, target).reshape(-1)
        idx = np.add(base[:n], codes, out=idx_buf[:n], casting="unsafe")
        out = np.take(lut, idx, out=out_buf[:n])
        res.values += out.size
        nan_codes, _ = _fp8_specials(codes, element, tmp)
        finite_exact = np.isfinite(exact)
        if np.isnan(exact[:, :, ~table_nan]).any():  # a NaN scale: count NaN outputs directly
            res.nan += int(np.count_nonzero(np.isnan(out.view(TARGETS[target][1]))))
        else:
            res.nan += nan_codes
        got = lut.view(TARGETS[target][1]).astype(np.float64).reshape(exact.shape)
        over = finite_exact & np.isinf(got)
        if over.any():
            res.overflow += int(np.count_nonzero(over.reshape(-1)[idx]))
        if target == "float32":
            rounded = finite_exact & ~over & (got != exact)
            if rounded.any():
                res.rounded += int(np.count_nonzero(rounded.reshape(-1)[idx]))
        emit(out.data)
        if progress:
            progress(n * cols)


def _stream_fp4(m: LayerMatch, scale: np.ndarray, src: Any, h: Header, e: Entry, target: str, glob: float | None,
                emit: Callable[[Any], None], res: ShardResult, progress: Callable[[int], None] | None) -> None:
    """One gather per packed byte from a (scale byte, packed byte) -> two outputs table."""
    p = m.producer
    if p.scheme == "mxfp4":
        lut, flags1 = _mxfp4_table(target)
    elif p.scale_format == "ue5m3":  # Quark amdfp4: a global multiplier only in the *_global schemes
        lut, flags1 = _nvfp4_table(1.0 if glob is None else glob, "multiplier", target, "ue5m3")
    else:
        assert glob is not None and p.global_direction is not None
        lut, flags1 = _nvfp4_table(glob, p.global_direction, target)
    flags = _pair_flags(flags1, target)
    risky: np.ndarray = np.asarray(flags1.any(axis=1))  # scale bytes that may give NaN, Inf or (f32) a rounding
    per_bytes = e.nbytes // max(int(np.asarray(scale).size), 1)  # the plan checked one scale per block
    sc16 = np.left_shift(np.ascontiguousarray(scale).view(np.uint8).reshape(-1).astype(np.intp), 8)
    groups = e.nbytes // per_bytes
    step = max(1, ROWS_PER_CHUNK_BYTES // per_bytes)
    idx_buf = np.empty((step, per_bytes), np.intp)  # take() would convert a narrower index anyway
    out_buf = np.empty((step, per_bytes), lut.dtype)
    src.seek(h.data_start + e.begin)
    for g0 in range(0, groups, step):
        n = min(step, groups - g0)
        raw = src.read(n * per_bytes)
        if len(raw) != n * per_bytes:
            raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
        b = np.frombuffer(raw, dtype=np.uint8).reshape(n, per_bytes)
        idx = np.bitwise_or(sc16[g0:g0 + n, None], b, out=idx_buf[:n])
        out = np.take(lut, idx, out=out_buf[:n])
        res.values += out.size * 2
        if flags is not None and risky[sc16[g0:g0 + n] >> 8].any():
            f = flags[idx]
            for bit, key in ((0, "nan"), (1, "overflow"), (2, "rounded")):
                n_set = int(np.count_nonzero(f & (1 << bit))) + int(np.count_nonzero(f & (8 << bit)))
                setattr(res, key, getattr(res, key) + n_set)
        emit(out.data)
        if progress:
            progress(n * per_bytes)


@lru_cache(maxsize=16)
def _mx_table(element: str, target: str) -> tuple[np.ndarray, np.ndarray]:
    """[E8M0 byte << b | code] -> target bits, and flags (1 NaN, 2 overflow, 4 rounded), for the
    b-bit MX element formats (FP8 and FP6); the products are exact in float64."""
    n_codes = 1 << get_format(element).bits
    with np.errstate(invalid="ignore", over="ignore"):
        vals = _scale_values("e8m0")[:, None] * np.asarray(
            decode(np.arange(n_codes, dtype=np.uint8), element, np.float64))[None, :]
    bits = _bits(vals, target)
    return bits.reshape(-1), _flags(vals, None, bits, target).reshape(-1)


def _stream_mxfp8(tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry, target: str,
                  emit: Callable[[Any], None], res: ShardResult, progress: Callable[[int], None] | None) -> None:
    """MXFP8 (FP8 codes, one E8M0 byte per 32 along a row): one gather per code from a
    (scale byte, code) table, as for FP4."""
    element = tj.match.element
    lut, flags = _mx_table(element, target)
    assert tj.block is not None
    per = tj.block[1]
    if e.shape[-1] % per:
        raise CheckpointError(f"{e.name}: rows of {e.shape[-1]} values are not whole blocks of {per}")
    sc = np.left_shift(np.ascontiguousarray(scale).view(np.uint8).reshape(-1).astype(np.intp), 8)
    groups = e.nbytes // per
    step = max(1, ROWS_PER_CHUNK_BYTES // per)
    idx_buf = np.empty((step, per), np.intp)
    out_buf = np.empty((step, per), lut.dtype)
    src.seek(h.data_start + e.begin)
    for g0 in range(0, groups, step):
        n = min(step, groups - g0)
        raw = src.read(n * per)
        if len(raw) != n * per:
            raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
        c = np.frombuffer(raw, dtype=np.uint8).reshape(n, per)
        idx = np.bitwise_or(sc[g0:g0 + n, None], c, out=idx_buf[:n])
        out = np.take(lut, idx, out=out_buf[:n])
        res.values += out.size
        f = flags[idx]
        if f.any():
            res.nan += int(np.count_nonzero(f & 1))
            res.overflow += int(np.count_nonzero(f & 2))
            res.rounded += int(np.count_nonzero(f & 4))
        emit(out.data)
        if progress:
            progress(n * per)


def _stream_fp6(tj: TensorJob, scale: np.ndarray, src: Any, h: Header, e: Entry, target: str,
                emit: Callable[[Any], None], res: ShardResult, progress: Callable[[int], None] | None) -> None:
    """MXFP6 (Quark): one gather per code from a (E8M0 byte, FP6 code) table of exact values, rounded once."""
    lut, flags = _mx_table(tj.match.producer.element, target)
    codes = unpack_fp6(read_array(src, h, e)).astype(np.intp)
    sc = np.repeat(np.ascontiguousarray(scale).view(np.uint8).astype(np.intp), 32, axis=1) << 6
    idx = sc | codes
    out = np.take(lut, idx)
    res.values += out.size
    f = flags[idx]
    if f.any():
        res.nan += int(np.count_nonzero(f & 1))
        res.overflow += int(np.count_nonzero(f & 2))
        res.rounded += int(np.count_nonzero(f & 4))
    emit(np.ascontiguousarray(out).data)
    if progress:
        progress(e.nbytes)


def _stream_tensor(job: _Job, tj: TensorJob, src: Any, h: Header, e: Entry, emit: Callable[[Any], None],
                   cache: dict[Path, Header], res: ShardResult, progress: Callable[[int], None] | None) -> None:
    m, target = tj.match, job.target
    p = m.producer
    scale = _read_named(job, m.scale, cache)
    if p.scheme in ("bnb4", "bnb8"):
        _stream_bnb(job, tj, scale, src, h, e, emit, cache, res, progress)
        return
    if p.scheme == "gptq":
        _stream_gptq(job, tj, scale, src, h, e, emit, cache, res, progress)
        return
    if p.scheme in ("quanto", "hqq", "torchao", "awq-gemv", "awq-gemv-fast", "awq-marlin"):
        _stream_hub(job, tj, scale, src, h, e, emit, cache, res, progress)
        return
    if p.packing in INT_PACKINGS and p.scheme != "fp8":
        _stream_int(job, tj, scale, src, h, e, emit, cache, res, progress)
        return
    if p.packing == "fp6":
        _stream_fp6(tj, scale, src, h, e, target, emit, res, progress)
        return
    if scale.ndim == 4:  # ModelOpt 2-D blocks [out/b0, 1, in/b1, 1]
        scale = scale.reshape(scale.shape[0], scale.shape[2])
    if p.scheme == "fp8" and p.scale_format == "e8m0":
        _stream_mxfp8(tj, scale, src, h, e, target, emit, res, progress)
        return
    if p.scheme == "fp8":
        _stream_fp8(tj, scale, src, h, e, target, emit, res, progress)
        return
    if p.scheme in ("nvfp4", "mxfp4"):
        glob = float(_read_named(job, m.global_scale, cache).reshape(-1)[0]) if m.global_scale else None
        _stream_fp4(m, scale, src, h, e, target, glob, emit, res, progress)
        return
    raise CheckpointError(f"{e.name}: scheme {p.scheme} cannot be dequantized")  # pragma: no cover


def _dequantize_shard(job: _Job, progress: Callable[[int], None] | None = None) -> ShardResult:
    t0 = time.perf_counter()
    h = read_header(job.shard)
    res = ShardResult(job.shard.name, bytes_in=h.file_size, tensors=len(h.entries))
    fingerprint = _fingerprint(h)
    if job.out_path.exists():
        try:
            prior = read_header(job.out_path)
            info = json.loads(prior.metadata.get(META_KEY, "{}"))
            recorded, actual = _data_checksum(job.out_path)
            if info.get("source_fingerprint") != fingerprint:
                res.redone = "the existing output was made from a different input"
            elif info.get("options") != job.options:
                res.redone = "the existing output was made with different options"
            elif recorded != actual:
                res.redone = "the existing output's data do not match its recorded CRC-32"
        except (CheckpointError, json.JSONDecodeError, OSError):
            res.redone = "the existing output is not a finished dequantization"
        if not res.redone:
            res.skipped = True
            res.bytes_out = job.out_path.stat().st_size
            if progress:
                progress(h.file_size)
            res.seconds = time.perf_counter() - t0
            return res
    tag = TARGETS[job.target][0]
    item = TARGETS[job.target][1].itemsize
    out_entries: list[Entry] = []
    tags: dict[str, str] = {}
    pos = 0
    plan_order: list[tuple[Entry, TensorJob | None]] = []
    for e in h.ordered():
        if e.name in job.dropped:
            res.dropped += 1
            continue
        tj = job.tensors.get(e.name)
        if tj is not None:
            n = int(np.prod(tj.out_shape, dtype=np.int64)) * item
            out_entries.append(Entry(tj.out_name, tag, tj.out_shape, pos, pos + n))
            tags[tj.out_name] = tag
        else:
            out_entries.append(Entry(e.name, e.dtype, e.shape, pos, pos + e.nbytes))
        pos = out_entries[-1].end
        plan_order.append((e, tj))
    info = {"target": job.target, "fmtsim_version": __version__, "source_file": job.shard.name,
            "source_fingerprint": fingerprint, "options": job.options,
            "dequantized": {tj.out_name: tj.match.producer.name for tj in job.tensors.values()},
            "data_crc32": "0" * 8}
    meta = {k: v for k, v in h.metadata.items() if k != META_KEY}
    meta[META_KEY] = json.dumps(info, separators=(",", ":"))
    header = header_bytes(out_entries, tags, meta)
    digest = _Crc()
    cache: dict[Path, Header] = {job.shard: h}
    with open(job.shard, "rb") as src, ShardWriter(job.out_path) as dst:
        dst.write(header)

        def emit(data: Any) -> None:
            digest.update(data)
            dst.write(data)

        for e, tj in plan_order:
            if tj is None:
                src.seek(h.data_start + e.begin)
                left = e.nbytes
                while left:
                    piece = src.read(min(left, 1 << 20))
                    if not piece:
                        raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
                    emit(piece)
                    left -= len(piece)
                if progress:
                    progress(e.nbytes)
            else:
                _stream_tensor(job, tj, src, h, e, emit, cache, res, progress)
                res.dequantized += 1
        info["data_crc32"] = digest.hexdigest()
        meta[META_KEY] = json.dumps(info, separators=(",", ":"))
        final_header = header_bytes(out_entries, tags, meta)
        if len(final_header) != len(header):  # pragma: no cover - equal-length hex checksums
            raise CheckpointError(f"{job.out_path}: internal error: header length changed")
        assert dst.fh is not None
        try:
            dst.fh.seek(0)
        except OSError as err:  # pragma: no cover
            raise CheckpointError(f"{job.out_path}: cannot write: {err.strerror}") from None
        dst.write(final_header)
        tmp = dst.finish()
        crosscheck(read_header(tmp))
        dst.commit()
    res.bytes_out = job.out_path.stat().st_size
    res.seconds = time.perf_counter() - t0
    return res


# ---- the whole job -------------------------------------------------------------------------


@dataclass
class DequantSummary:
    source: Source
    output: Path
    target: str
    detection: Detection
    jobs: dict[str, TensorJob]
    shards: list[ShardResult]
    seconds: float
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        keys = ("tensors", "dequantized", "dropped", "bytes_in", "bytes_out", "values", "rounded", "overflow", "nan")
        return {k: sum(getattr(s, k) for s in self.shards) for k in keys}


def _scan(path: str | Path, producer: str | None) -> tuple[Source, dict[Path, Header], dict[str, Path],
                                                            dict[str, Any], Detection]:
    src = find_source(path)
    headers, where = read_headers(src)
    configs = read_configs(src.path if src.is_dir else src.path.parent)
    dtypes = {n: headers[where[n]].entries[n].dtype for n in where}
    try:
        det = detect(dtypes, configs, producer)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    why = unread_layout(dtypes, configs, det)
    if why:
        raise CheckpointError(f"{src.path}: {why}")
    return src, headers, where, configs, det


def dequantize(
    src: str | Path,
    out: str | Path,
    *,
    dtype: str = "bfloat16",
    producer: str | None = None,
    jobs: int = 1,
    progress: bool = False,
    scheduler: Any = None,
    arithmetic: str = "exact",
) -> DequantSummary:
    """Dequantize every tensor a producer record matches; see the module docstring. Shards
    run in ``jobs`` local processes or, with ``scheduler`` (a dask.distributed.Client or an
    address, fmtsim[dask]), on a Dask cluster's workers (fmtsim.executor).

    ``arithmetic``: 'exact' (every value exact, rounded once into ``dtype``) or 'library': where the
    producing library's own dequantization rounds in between (optimum-quanto qint4/qint2, HQQ,
    torchao NVFP4, gptqmodel loaded in bfloat16), its arithmetic, step by step, so the output is its
    bits; elsewhere the two are the same."""
    check_path(src, "dequantize: src")
    check_path(out, "dequantize: out")
    check_paths(src, out)
    if dtype not in TARGETS:
        raise CheckpointError(f"--dtype must be one of {', '.join(TARGETS)}, not {dtype!r}")
    if arithmetic not in ARITHMETICS:
        raise CheckpointError(f"--arithmetic must be one of {', '.join(ARITHMETICS)}, not {arithmetic!r}")
    t0 = time.perf_counter()
    source, headers, where, configs, det = _scan(src, producer)
    if det.ambiguous:
        name, cands = next(iter(sorted(det.ambiguous.items())))
        raise CheckpointError(f"{name}: matches producers with different rules ({', '.join(cands)}) and no config "
                              f"file says which; choose with --producer NAME ({len(det.ambiguous)} such tensor(s))")
    dtypes = {n: headers[where[n]].entries[n].dtype for n in where}
    lacking = codes_without_scales(dtypes, configs, det)
    if lacking:
        name, rec, missing = lacking[0]
        raise CheckpointError(f"{name}: {rec.title} codes without {' and '.join(missing)}; nothing written (its "
                              f"packed codes would be copied as if they were weights; {len(lacking)} such tensor(s))")
    if not det.layers:
        raise CheckpointError(f"{source.path}: no tensor matches a known producer layout; nothing to dequantize "
                              "(see 'fmtsim checkpoint inspect')")
    entries = {n: headers[where[n]].entries[n] for n in where}

    def read_small(name: str) -> np.ndarray:  # a side tensor the plan needs (weight_shape)
        with open(where[name], "rb") as fh:
            return read_array(fh, headers[where[name]], entries[name])

    plans = {n: layer_plan(m, entries, configs, read_small) for n, m in det.layers.items()}
    dropped: set[str] = set()
    for m in det.layers.values():
        for extra in (m.scale, m.global_scale, m.zero_point, m.shape_tensor, m.pre_scale):
            if extra:
                dropped.add(extra)
        for suffix in m.producer.extra:
            if m.layer + suffix in where:
                dropped.add(m.layer + suffix)
    if arithmetic == "library" and dtype == "float16":
        bf16 = sorted(n for n, tj in plans.items() if tj.match.producer.scheme in ("quanto", "hqq", "torchao")
                      and (tj.match.producer.scheme == "torchao" or entries[tj.match.scale].dtype == "BF16"))
        if bf16:
            raise CheckpointError(f"{bf16[0]}: --arithmetic library gives its library's bfloat16 values; float16 "
                                  "would round them again: use --dtype bfloat16 (or float32, which holds them "
                                  "exactly)")
    out_names = [tj.out_name for tj in plans.values()]
    clash = (set(out_names) & (set(where) - set(plans) - dropped)) or {n for n in out_names if out_names.count(n) > 1}
    if clash:
        raise CheckpointError(f"output tensor name {sorted(clash)[0]!r} would exist twice")
    out_p = check_output(source, out)
    is_dir = source.is_dir
    out_dir = out_p if is_dir else out_p.parent
    make_output_dir(out_dir)
    notes = [f"removed {q.name} (left by a killed run)" for q in remove_stale_temps(out_dir)]
    notes += [f"{n}: block shape {tj.block_source}" for n, tj in sorted(plans.items())
              if tj.block_source.startswith("inferred")]
    options = {"dtype": dtype, "producer": producer, "arithmetic": arithmetic}
    job_list = [_Job(s, (out_p / s.name) if is_dir else out_p, dtype,
                     {n: tj for n, tj in plans.items() if where[n] == s},
                     {n for n in dropped if where[n] == s}, where, options) for s in source.shards]
    total = sum(h.file_size for h in headers.values())
    results: list[ShardResult] = run_shards(_dequantize_shard, job_list, jobs, lambda r: r.bytes_in, scheduler,
                                            (total, "dequantize") if progress else None)
    if is_dir:
        notes += _side_files(source, out_p, plans, dropped, where, dtype)
    return DequantSummary(source, out_p, dtype, det, plans, results, time.perf_counter() - t0, notes)


def _side_files(source: Source, out: Path, plans: dict[str, TensorJob], dropped: set[str],
                where: dict[str, Path], dtype: str) -> list[str]:
    rewrite: dict[str, bytes] = {}
    notes: list[str] = []
    note = {"target": dtype, "fmtsim_version": __version__}
    if source.index is not None:
        index = json.loads(json.dumps(source.index))
        wm = {}
        for name, shard in index["weight_map"].items():
            if name in dropped:
                continue
            wm[plans[name].out_name if name in plans else name] = shard
        index["weight_map"] = dict(sorted(wm.items()))
        meta = dict(index.get("metadata") or {})
        meta.pop("total_size", None)
        meta[META_KEY] = note
        index["metadata"] = meta
        rewrite[INDEX_NAME] = (json.dumps(index, indent=2) + "\n").encode()
    cfg_path = source.path / "config.json"
    if cfg_path.is_file():
        try:
            cfg = json.loads(cfg_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{cfg_path}: not valid JSON: {e}") from None
        if isinstance(cfg, dict):
            qc = cfg.pop("quantization_config", None)
            cfg["fmtsim_dequantized"] = dict(note, quantization_config=qc)
            if "torch_dtype" in cfg:
                cfg["torch_dtype"] = dtype
            rewrite["config.json"] = (json.dumps(cfg, indent=2) + "\n").encode()
    skip = {s.name for s in source.shards}
    if (source.path / "hf_quant_config.json").exists():
        skip.add("hf_quant_config.json")
        notes.append("hf_quant_config.json: left out (the output is not quantized)")
    return notes + copy_side_files(source, out, skip, rewrite)
