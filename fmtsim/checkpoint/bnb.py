"""bitsandbytes checkpoints (as transformers' ``save_pretrained`` writes them): NF4 / FP4 with and
without double quantization, and LLM.int8, decoded value for value as bitsandbytes computes them.

4-bit (record ``bitsandbytes-4bit``; bitsandbytes 0.50.2 ``functional.quantize_4bit`` /
``dequantize_4bit``, ``backends/default/ops.py``):

- ``L.weight`` U8 [ceil(n/2), 1]: the weight flattened row-major, two 4-bit codes per byte, element
  2i in the high nibble; ``L.weight.quant_state.bitsandbytes__nf4`` (or ``__fp4``) U8: a JSON text
  with ``quant_type``, ``blocksize`` (64 here), ``dtype`` and ``shape`` (and, with double
  quantization, ``nested_blocksize`` and ``nested_offset``); ``L.weight.quant_map`` F32 [16]: the NF4
  or FP4 values the codes index.
- absmax, one per ``blocksize`` values of the flattened weight: ``L.weight.absmax`` F32, or with
  double quantization U8 codes into ``L.weight.nested_quant_map`` F32 [256], one
  ``L.weight.nested_absmax`` F32 per ``nested_blocksize`` of them, and the offset:
  ``absmax = float32(nested_quant_map[c] * nested_absmax[i // nested_blocksize]) + offset`` (float32
  operations, as ``dequantize_blockwise`` and ``absmax += offset`` run).
- value: ``float32(quant_map[code] * absmax[i // blocksize])``; bitsandbytes returns it cast to the
  state's dtype (bfloat16 here), i.e. rounded once more, to nearest even: ``dequantize --dtype
  bfloat16`` gives its bits.

LLM.int8 (record ``bitsandbytes-int8``; ``int8_vectorwise_dequant``): ``L.weight`` I8 [out, in],
``L.SCB`` F32 [out] (each row's absmax); value ``float32(float32(q * SCB[row]) * float32(1/127))``.

Not followed: bitsandbytes 0.50.2's CPU C++ 4-bit kernel (``cdequantize_blockwise_cpu_nf4_*``, which
``dequantize_4bit`` runs on a CPU for an even row length) takes the absmax of element (r, c) as
``absmax[r * (n // blocksize) + c // blocksize]``: right only when the row length n is a multiple of
the blocksize. For other rows (a [64, 96] ``down_proj`` in the fixtures) it reads the wrong absmax
for most blocks, while ``quantize_4bit`` (and bitsandbytes' own ``_dequantize_4bit_compute``, its
fallback for odd rows) blocks the flattened weight. fmtsim decodes the file by the rule its writer
used; :data:`CPU_KERNEL_ROW_BLOCKS` names the divergence and :func:`bnb4_values` with
``cpu_kernel_rows=True`` reproduces the kernel (the fixture test holds both).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .files import CheckpointError

__all__ = ["Bnb4State", "bnb4_state", "bnb4_absmax", "bnb4_values", "bnb8_values", "CPU_KERNEL_ROW_BLOCKS",
           "QUANT_STATE_SUFFIXES"]

F32 = np.float32
QUANT_STATE_SUFFIXES = (".weight.quant_state.bitsandbytes__nf4", ".weight.quant_state.bitsandbytes__fp4")
CPU_KERNEL_ROW_BLOCKS = (
    "bitsandbytes 0.50.2's CPU 4-bit dequantize kernel (cdequantize_blockwise_cpu_nf4/fp4_*) reads the absmax of "
    "element (r, c) at r * (n // blocksize) + c // blocksize, not (r * n + c) // blocksize: its output differs "
    "from the file's values wherever the row length n is not a multiple of the blocksize (quantize_4bit blocks "
    "the flattened weight)")


@dataclass(frozen=True)
class Bnb4State:
    quant_type: str
    blocksize: int
    dtype: str
    shape: tuple[int, ...]
    nested_blocksize: int | None
    nested_offset: float | None

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def bnb4_state(layer: str, entries: dict[str, Any], read: Callable[[str], np.ndarray] | None) -> tuple[str, Bnb4State]:
    """The layer's quant_state JSON, parsed and checked; (its tensor name, the state)."""
    names = [layer + s for s in QUANT_STATE_SUFFIXES if layer + s in entries]
    if not names:
        raise CheckpointError(f"{layer}.weight: no {layer}.weight.quant_state.bitsandbytes__nf4 / __fp4 tensor: "
                              "without it the weight's shape and block size are unknown")
    if read is None:  # pragma: no cover - every caller that plans a bnb layer passes a reader
        raise CheckpointError(f"{names[0]}: the quant_state must be read to plan this layer")
    name = names[0]
    try:
        d = json.loads(bytes(np.asarray(read(name)).astype(np.uint8).reshape(-1)).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{name}: not the JSON text bitsandbytes writes ({e})") from None
    try:
        qt, bs, dt = d["quant_type"], int(d["blocksize"]), str(d["dtype"])
        shape = tuple(int(v) for v in d["shape"])
        nbs = int(d["nested_blocksize"]) if "nested_blocksize" in d else None
        off = float(d["nested_offset"]) if "nested_offset" in d else None
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{name}: quant_state lacks or mangles {e} (it needs quant_type, blocksize, dtype, "
                              "shape)") from None
    if qt not in ("nf4", "fp4") or not name.endswith(qt):
        raise CheckpointError(f"{name}: quant_type {qt!r} (the tensor's name says {name.rsplit('__', 1)[-1]})")
    if bs <= 0 or not shape or any(n <= 0 for n in shape) or (nbs is not None and nbs <= 0):
        raise CheckpointError(f"{name}: blocksize {bs}, shape {list(shape)}, nested blocksize {nbs}: not a layout")
    if (nbs is None) != (off is None):
        raise CheckpointError(f"{name}: nested_blocksize and nested_offset come together (double quantization)")
    return name, Bnb4State(qt, bs, dt, shape, nbs, off)


def bnb4_absmax(state: Bnb4State, absmax: np.ndarray, nested_quant_map: np.ndarray | None = None,
                nested_absmax: np.ndarray | None = None) -> np.ndarray:
    """The float32 absmax per block, the double quantization undone as bitsandbytes does it."""
    blocks = -(-state.elements // state.blocksize)
    if absmax.size != blocks:
        raise CheckpointError(f"absmax has {absmax.size} values; {state.elements} elements in blocks of "
                              f"{state.blocksize} need {blocks}")
    if state.nested_blocksize is None:
        if absmax.dtype != np.float32:
            raise CheckpointError(f"absmax is {absmax.dtype}; without double quantization it is float32")
        return absmax.reshape(-1)
    if nested_quant_map is None or nested_absmax is None or absmax.dtype != np.uint8:
        raise CheckpointError("double quantization needs U8 absmax codes, nested_quant_map and nested_absmax")
    nb = state.nested_blocksize
    if nested_quant_map.size != 256 or nested_absmax.size != -(-blocks // nb):
        raise CheckpointError(f"nested_quant_map has {nested_quant_map.size} values (256 expected), nested_absmax "
                              f"{nested_absmax.size} ({-(-blocks // nb)} expected for {blocks} blocks of {nb})")
    codes = absmax.reshape(-1).astype(np.intp)
    assert state.nested_offset is not None
    scale = np.repeat(nested_absmax.astype(F32).reshape(-1), nb)[: codes.size]
    return (nested_quant_map.astype(F32).reshape(-1)[codes] * scale) + F32(state.nested_offset)


def bnb4_values(state: Bnb4State, packed: np.ndarray, quant_map: np.ndarray, absmax: np.ndarray,
                cpu_kernel_rows: bool = False) -> np.ndarray:
    """float32 values, shape ``state.shape``: quant_map[code] * absmax, one float32 product per element.
    ``cpu_kernel_rows`` reproduces bitsandbytes' CPU kernel's absmax indexing (CPU_KERNEL_ROW_BLOCKS)."""
    n = state.elements
    b = np.asarray(packed).view(np.uint8).reshape(-1)
    if b.size != -(-n // 2):
        raise CheckpointError(f"{b.size} code bytes; {n} elements need {-(-n // 2)}")
    if quant_map.size != 16:
        raise CheckpointError(f"quant_map has {quant_map.size} values; a 4-bit code needs 16")
    codes = np.stack([b >> 4, b & 0x0F], axis=1).reshape(-1)[:n]  # element 2i in the high nibble
    if cpu_kernel_rows:
        cols = state.shape[-1]
        r, c = np.divmod(np.arange(n), cols)
        block = np.minimum(r * (cols // state.blocksize) + c // state.blocksize, absmax.size - 1)
    else:
        block = np.arange(n) // state.blocksize
    return (quant_map.astype(F32).reshape(-1)[codes] * absmax.reshape(-1)[block]).reshape(state.shape)


def bnb8_values(q: np.ndarray, scb: np.ndarray) -> np.ndarray:
    """LLM.int8: float32(float32(q * SCB[row]) * float32(1/127)), as int8_vectorwise_dequant computes it."""
    if q.ndim != 2 or scb.reshape(-1).size != q.shape[0]:
        raise CheckpointError(f"LLM.int8 weight {list(q.shape)} needs one SCB per row, got {scb.size}")
    return (q.astype(F32) * scb.astype(F32).reshape(-1, 1)) * F32(1 / 127)
