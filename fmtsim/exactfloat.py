"""Error-free float64 transformations: exact results carried as an unevaluated pair of float64s.

Used where a product must be known exactly without leaving numpy (integer scaling's half-way tests,
checkpoint dequantization by a divisor global scale).
"""

from __future__ import annotations

import numpy as np

__all__ = ["two_product"]

_SPLITTER = 134217729.0  # 2^27 + 1: Veltkamp split of a float64 into two 26-bit halves


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p + e == a * b exactly and p = fl(a * b) (Dekker 1971), for finite float64 a, b
    whose product neither overflows nor underflows."""
    p = a * b
    ca = _SPLITTER * a
    ah = ca - (ca - a)
    al = a - ah
    cb = _SPLITTER * b
    bh = cb - (cb - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e
