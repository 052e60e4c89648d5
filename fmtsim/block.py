"""One engine for every shared-scale scheme: cut x into blocks, reduce each block,
turn the reduction into a scale, encode the elements.

A *block* is a run of ``block`` consecutive elements along ``axis``, or a
``rows x block`` tile whose rows run along the axis before it (NVFP4 16x16
weight tiles), or everything sharing an index of ``channel_axis``, or the whole
tensor. :func:`split` turns any of these into a 2-D ``(n_blocks, block_len)``
array and records how to undo it; every scheme (mx.py, nvfp4.py, intq.py)
computes on that 2-D view and calls :func:`merge` / :func:`scales_to_layout`
to give results back in the caller's layout.

Scale layouts handed back to users:

    blocks along an axis   x.shape with that axis divided by the block length
    2-D tiles              the same: each tile's scale repeated for its rows (as
                           TransformerEngine stores 16x16 weight scales)
    per channel            x.shape with every other axis 1 (broadcasts against x)
    per tensor             shape ()
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .argcheck import flag, integer, optional_integer

__all__ = ["Blocks", "split", "merge", "scale_shape", "scales_to_layout", "scales_from_layout", "block_amax", "row_max"]


@dataclass(frozen=True)
class Blocks:
    """x as a (n_blocks, block_len) array, and the recipe to put results back."""

    data: np.ndarray
    kind: str  # "axis", "tile", "channel", "tensor"
    shape: tuple[int, ...]  # the caller's shape
    axis: int  # normalised axis (or channel axis)
    block: int  # block length along the axis
    rows: int  # tile rows (1 unless kind == "tile")
    padded: int  # length of the axis after zero padding

    @property
    def n_blocks(self) -> int:
        return self.data.shape[0]


# pad=True may grow an array to at most max(2 * its size, this many elements): beyond that a
# block size is taken for a mistake (block_size=2**40 would otherwise ask for terabytes)
PAD_LIMIT = 1 << 26


def _norm_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for an array of {ndim} dimension(s)")
    return axis % ndim


def split(
    x: np.ndarray,
    *,
    axis: int = -1,
    block: int | None = None,
    rows: int = 1,
    channel_axis: int | None = None,
    pad: bool = False,
    what: str = "x",
    can_pad: bool = True,
) -> Blocks:
    """Cut ``x`` into blocks (see the module docstring). ``block=None`` means per tensor
    (or per channel with ``channel_axis``). A length that is not a multiple of the
    block is an error naming both, unless ``pad=True`` (zeros appended; refused when
    it would more than double an array beyond 2^26 elements). ``can_pad=False`` leaves
    the pad hint out of that message (for callers without a ``pad`` argument).

    axis, block, rows and channel_axis are integers (bool and float refused); a 0-d x
    counts as one element along one axis."""
    axis = integer(axis, f"{what}: axis")
    block = optional_integer(block, f"{what}: block size", low=1)
    rows = integer(rows, f"{what}: tile rows", low=1)
    channel_axis = optional_integer(channel_axis, f"{what}: channel_axis")
    pad = flag(pad, f"{what}: pad")
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1)
    if channel_axis is not None:
        ax = _norm_axis(channel_axis, x.ndim, what)
        data = np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)
        return Blocks(data, "channel", x.shape, ax, data.shape[1], 1, x.shape[ax])
    if block is None:
        return Blocks(x.reshape(1, -1), "tensor", x.shape, 0, x.size, 1, x.size)
    ax = _norm_axis(axis, x.ndim, what)
    length = x.shape[ax]
    xm = np.moveaxis(x, ax, -1)
    padded = -(-length // block) * block
    if padded != length:
        if not pad:
            hint = "; pass pad=True to pad with zeros" if can_pad else ""
            raise ValueError(
                f"{what}: axis {axis} has length {length}, not a multiple of the block size {block}{hint}"
            )
        total = (x.size // length) * padded
        if total > max(2 * x.size, PAD_LIMIT):
            raise ValueError(
                f"{what}: block size {block} with pad=True would pad axis {axis} from {length} to {padded} "
                f"elements ({total} in all); refused as a mistake (padding may grow an array to at most "
                f"max(2 x its size, 2^26) elements)"
            )
        widths = [(0, 0)] * (xm.ndim - 1) + [(0, padded - length)]
        xm = np.pad(xm, widths)
    if rows == 1:
        data = xm.reshape(-1, block)
        return Blocks(data, "axis", x.shape, ax, block, 1, padded)
    if ax != x.ndim - 1 or x.ndim < 2:
        raise ValueError(f"{what}: {rows}x{block} tiles need a 2-D (or more) array blocked along its last axis")
    m = xm.shape[-2]
    if m % rows:
        raise ValueError(f"{what}: {m} rows are not a multiple of the tile height {rows}")
    lead = xm.shape[:-2]
    t = xm.reshape(*lead, m // rows, rows, padded // block, block)
    t = np.moveaxis(t, -3, -2)  # (..., m/rows, k/block, rows, block)
    return Blocks(t.reshape(-1, rows * block), "tile", x.shape, ax, block, rows, padded)


def _check_blocks(b: Any, what: str) -> None:
    if not isinstance(b, Blocks):
        raise TypeError(f"{what}: b must be the Blocks that split() returned, not {type(b).__name__}")


def merge(flat: np.ndarray, b: Blocks, *, trim: bool = True) -> np.ndarray:
    """Per-element results laid out like ``b.data`` (any shape with that many elements)
    -> the caller's layout; ``trim`` drops the padding."""
    _check_blocks(b, "merge")
    flat = np.asarray(flat)
    if flat.size != b.data.size:
        raise ValueError(f"merge: {flat.size} values for blocks of shape {b.data.shape} ({b.data.size} values)")
    if b.kind == "tensor":
        return flat.reshape(b.shape)
    if b.kind == "channel":
        moved = (b.shape[b.axis],) + tuple(s for i, s in enumerate(b.shape) if i != b.axis)
        return np.moveaxis(flat.reshape(moved), 0, b.axis)
    moved_shape = tuple(s for i, s in enumerate(b.shape) if i != b.axis) + (b.padded,)
    if b.kind == "tile":
        lead, m = moved_shape[:-2], moved_shape[-2]
        t = flat.reshape(*lead, m // b.rows, b.padded // b.block, b.rows, b.block)
        t = np.moveaxis(t, -2, -3)
        out = t.reshape(moved_shape)
    else:
        out = flat.reshape(moved_shape)
    if trim and b.padded != b.shape[b.axis]:
        out = out[..., : b.shape[b.axis]]
    return np.moveaxis(out, -1, b.axis)


def scale_shape(b: Blocks) -> tuple[int, ...]:
    """The shape of the user-facing scale layout of ``b`` (module docstring)."""
    _check_blocks(b, "scale_shape")
    if b.kind == "tensor":
        return ()
    if b.kind == "channel":
        return tuple(s if i == b.axis else 1 for i, s in enumerate(b.shape))
    nb = b.padded // b.block
    return tuple(nb if i == b.axis else s for i, s in enumerate(b.shape))


def scales_to_layout(per_block: np.ndarray, b: Blocks) -> np.ndarray:
    """One value per block (``b.n_blocks`` values) -> the user-facing scale layout."""
    _check_blocks(b, "scales_to_layout")
    per_block = np.asarray(per_block)
    if per_block.size != b.n_blocks:
        raise ValueError(f"scales_to_layout: {per_block.size} values for {b.n_blocks} blocks")
    if b.kind == "tensor":
        return per_block.reshape(())
    if b.kind == "channel":
        shape = [1] * len(b.shape)
        shape[b.axis] = b.shape[b.axis]
        return per_block.reshape(shape)
    moved_lead = tuple(s for i, s in enumerate(b.shape) if i != b.axis)
    nb = b.padded // b.block
    if b.kind == "tile":
        lead, m = moved_lead[:-1], moved_lead[-1]
        s = per_block.reshape(*lead, m // b.rows, 1, nb)
        s = np.broadcast_to(s, (*lead, m // b.rows, b.rows, nb)).reshape(*lead, m, nb)
        return np.ascontiguousarray(s)
    return np.moveaxis(per_block.reshape(*moved_lead, nb), -1, b.axis)


def scales_from_layout(scales: np.ndarray, b: Blocks) -> np.ndarray:
    """The user-facing scale layout -> one value per block (tiles: the first row's).

    ``scales`` must have exactly the layout's shape (:func:`scale_shape`); tiles must
    repeat each scale on all of the tile's rows. Otherwise ValueError naming both."""
    _check_blocks(b, "scales_from_layout")
    s = np.asarray(scales)
    want = scale_shape(b)
    if s.shape != want:
        raise ValueError(f"scales have shape {s.shape}; {b.kind} blocks of an array of shape {b.shape} need {want}")
    if b.kind == "tile" and s.size:
        m = np.moveaxis(s, b.axis, -1)
        t = m.reshape(*m.shape[:-2], m.shape[-2] // b.rows, b.rows, m.shape[-1])
        same = t == t[..., :1, :]
        if not same.all():
            i = int(np.argmax(~same.reshape(-1)))
            raise ValueError(f"scales: {b.rows}x{b.block} tiles store one scale repeated on each of the tile's "
                             f"{b.rows} rows; they differ (first at flat index {i} of the tiled view)")
    if b.kind in ("tensor", "channel"):
        return s.reshape(-1)
    moved = np.moveaxis(s, b.axis, -1)
    if b.kind == "tile":
        return moved[..., :: b.rows, :].reshape(-1)
    return moved.reshape(-1)


def row_max(a: np.ndarray) -> np.ndarray:
    """Max of each row; NaN if the row holds one. Short rows (MX blocks of 32) reduce
    about twice as fast by halving with np.maximum than with max(axis=1). ``a`` is 2-D."""
    a = np.asarray(a)
    if a.dtype.kind not in "iuf" and a.dtype.name != "bfloat16":
        raise TypeError(f"row_max: expected real numbers, not {a.dtype}")
    if a.ndim != 2:
        raise ValueError(f"row_max: expected a 2-D (blocks, block length) array, got shape {a.shape}")
    if a.shape[1] == 0:
        return np.zeros(a.shape[0], dtype=a.dtype)
    w = a.shape[1]
    while w > 1 and w % 2 == 0:
        w //= 2
        a = np.maximum(a[:, :w], a[:, w : 2 * w])
    out: Any = a.max(axis=1) if w > 1 else a[:, 0]
    return np.asarray(out)


def block_amax(data: np.ndarray) -> np.ndarray:
    """max |x| of each block of a 2-D (blocks, block length) array; NaN if the block holds
    a NaN (np.maximum propagates it)."""
    data = np.asarray(data)
    if data.ndim != 2:
        raise ValueError(f"block_amax: expected a 2-D (blocks, block length) array, got shape {data.shape}")
    if data.dtype.kind not in "iuf" and data.dtype.name != "bfloat16":
        raise TypeError(f"block_amax: expected real numbers, not {data.dtype}")
    return row_max(np.abs(data))
