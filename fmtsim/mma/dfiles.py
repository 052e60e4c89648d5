"""GEMM operand and result files as a kernel engineer has them: ``.npy`` arrays, or raw
row-major binaries of a stated shape (one byte per FP8/FP6/FP4 code or scale code, two
little-endian bytes per fp16/bf16 code, four per fp32 pattern or float32 C or D, eight per
fp64 pattern or float64 C or D of the fp64 units), and the comparison of
a device's D against fmtsim's: ulp distances and the first differing outputs by row and
column.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..fileio import atomic_write

__all__ = ["read_array", "write_d", "ulp_distance", "DComparison", "compare_d"]

_RAW_SUFFIXES = (".bin", ".raw", ".u8", ".u16", ".f32", ".f64")


def read_array(path: str | Path, what: str, shape: tuple[int, ...] | None, dtype: np.dtype | type
               ) -> np.ndarray:
    """A 2-D array from ``path``: a .npy file (its own shape and dtype; ``shape`` checked when
    given), or raw row-major bytes of ``dtype`` (little-endian) that must hold ``shape``."""
    p = Path(path)
    dt = np.dtype(dtype).newbyteorder("<")
    data = p.read_bytes()
    if data[:6] == b"\x93NUMPY":
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as e:
            raise ValueError(f"{p}: not a readable .npy file ({e})") from None
        except MemoryError:  # a header declaring a shape no memory holds (the file is far shorter)
            raise ValueError(f"{p}: not a readable .npy file (its header declares {what} larger than this "
                             f"machine's memory; the file holds {len(data)} bytes)") from None
        if shape is not None and arr.shape != shape and arr.size == math.prod(shape) and arr.ndim == 1:
            arr = arr.reshape(shape)
        if shape is not None and arr.shape != shape:
            raise ValueError(f"{p}: {what} has shape {arr.shape}; the GEMM needs {shape}")
        if arr.ndim != 2:
            raise ValueError(f"{p}: {what} must be 2-D, got shape {arr.shape}")
        return arr
    if shape is None:
        raise ValueError(f"{p}: {what} is raw binary (not .npy): give its shape with --shape M,N,K")
    want = math.prod(shape) * dt.itemsize  # Python ints: an int64 product wraps (2^32 x 2^32 is 0)
    if len(data) != want:
        raise ValueError(f"{p}: {what} holds {len(data)} bytes; {shape} of {dt.itemsize}-byte values is {want}")
    return np.frombuffer(data, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def write_d(path: str | Path, d: np.ndarray, inputs: Iterable[str | Path | None] = ()) -> None:
    """D as .npy, or as raw float32 bits (float64 for the fp64 units' D, never narrowed) when
    ``path`` ends in .bin/.raw/.f32/.f64; through a temporary name. Refuses (UnsafeOutputError)
    a ``path`` that is not a regular file or is one of ``inputs``."""
    p = Path(path)
    wide = np.asarray(d).dtype == np.float64
    d32 = np.ascontiguousarray(d, dtype=np.float64 if wide else np.float32)
    if p.suffix.lower() in _RAW_SUFFIXES:
        atomic_write(p, d32.astype("<f8" if wide else "<f4").tobytes(), inputs, "-o")
        return
    buf = io.BytesIO()
    np.save(buf, d32, allow_pickle=False)
    atomic_write(p, buf.getvalue(), inputs, "-o")


def _ordered(bits: np.ndarray) -> np.ndarray:
    """float32 patterns -> integers in the order of their values (-0 and +0 both 0)."""
    b = bits.astype(np.int64)
    return np.where(b >> 31, -(b & 0x7FFFFFFF), b)


def ulp_distance(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Number of float32 values from one to the other (0 for +0 vs -0; not for NaNs)."""
    e = np.ascontiguousarray(expected, np.float32).view(np.uint32)
    a = np.ascontiguousarray(actual, np.float32).view(np.uint32)
    return np.abs(_ordered(e) - _ordered(a))


@dataclass
class DComparison:
    """A device's D against fmtsim's."""

    cases: int
    failed: int
    max_ulp: int  # over the finite pairs that differ (0 when none)
    bins: dict[str, int] = field(default_factory=dict)  # ulp distance -> count of differing outputs
    first: list[str] = field(default_factory=list)  # the first differing outputs, row-major

    def report(self) -> list[str]:
        lines = list(self.first)
        if self.failed > len(self.first):
            lines.append(f"... {self.failed - len(self.first)} more")
        if self.failed:
            lines.append("ulp distances of the differing outputs: "
                         + ", ".join(f"{k}: {v}" for k, v in self.bins.items() if v))
        lines.append(f"D: {self.cases} outputs, {self.cases - self.failed} equal, {self.failed} differ"
                     + (f" (max {self.max_ulp} ulp)" if self.failed else ""))
        return lines


def compare_d(expected: np.ndarray, actual: np.ndarray, *, check_nans: bool = False, max_errors: int = 20
              ) -> DComparison:
    """Compare bit patterns: equal bits pass; any NaN matches any NaN unless ``check_nans``
    (then the patterns must match too); +0 and -0 differ (they are different results)."""
    if expected.shape != actual.shape:
        raise ValueError(f"D has shape {actual.shape}; fmtsim's D is {expected.shape}")
    e = np.ascontiguousarray(expected, np.float32).view(np.uint32)
    a = np.ascontiguousarray(actual, np.float32).view(np.uint32)
    both_nan = np.isnan(e.view(np.float32)) & np.isnan(a.view(np.float32))
    bad = e != a
    if not check_nans:
        bad &= ~both_nan
    dist = ulp_distance(e.view(np.float32), a.view(np.float32))
    nan_either = np.isnan(e.view(np.float32)) | np.isnan(a.view(np.float32))
    finite_bad = bad & ~nan_either
    bins = {"NaN vs number": int((bad & nan_either & ~both_nan).sum()),
            "NaN payload": int((bad & both_nan).sum()),
            "0 (+0 vs -0)": int((finite_bad & (dist == 0)).sum()),
            "1": int((finite_bad & (dist == 1)).sum()),
            "2-15": int((finite_bad & (dist >= 2) & (dist < 16)).sum()),
            "16-255": int((finite_bad & (dist >= 16) & (dist < 256)).sum()),
            ">=256": int((finite_bad & (dist >= 256)).sum())}
    first = []
    for i, j in np.argwhere(bad)[:max_errors]:
        ev, av = e[i, j].view(np.float32), a[i, j].view(np.float32)
        far = "NaN" if nan_either[i, j] else f"{int(dist[i, j])} ulp"
        first.append(f"D[{i}, {j}]: fmtsim {int(e[i, j]):#010x} ({float(ev)!r}), device {int(a[i, j]):#010x} "
                     f"({float(av)!r}), {far}")
    return DComparison(int(e.size), int(bad.sum()), int(dist[finite_bad].max()) if finite_bad.any() else 0,
                       bins, first)
