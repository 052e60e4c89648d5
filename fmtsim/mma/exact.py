"""The ``exact`` unit: every product (times its block's scale product) and C summed
exactly, then one RNE rounding to fp32 (+0 for an exact zero; beyond fp32: +-Inf).

Block sums are integer matmuls, done in float64 (exact while every partial sum stays
below 2^53), int64 (below 2^63) or Python integers (object arrays) when the operands'
exponent spread demands it; blocks with different scales and C are then combined as
Python integers, one output at a time only in the final rounding.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .arith import split_f32

if TYPE_CHECKING:
    from .gemm import Prepared, _Split

__all__ = ["exact_range", "round_int_f32"]


def _int_values(side: _Split, k0: int, k1: int) -> tuple[np.ndarray, int]:
    """Operand values over K columns k0..k1 as exact integers times 2^-(man - emin)."""
    mag, exp, sgn = side.mag[:, k0:k1], side.exp[:, k0:k1], side.sgn[:, k0:k1]
    sh = np.where(mag == 0, 0, exp - side.emin)
    width = int(sh.max(initial=0)) + 24
    if width < 62:
        v = (mag << sh) * sgn
    else:
        v = np.frompyfunc(lambda m, s, g: (int(m) << int(s)) * int(g), 3, 1)(mag, sh, sgn)
    return v, side.man - side.emin


def _int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a (M, K) @ b.T (N, K) exactly, as int64 or object."""
    if a.dtype != object and b.dtype != object:
        amax = int(np.abs(a).max(initial=0))
        bmax = int(np.abs(b).max(initial=0))
        bound = amax * bmax * a.shape[1]
        if bound < 2**53:
            return (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64)
        if bound < 2**63:
            return a @ b.T
    return np.dot(a.astype(object), b.astype(object).T)


def round_int_f32(s: int, x: int) -> float:
    """s * 2^x rounded to nearest even fp32 (+0 for 0; +-Inf beyond the range)."""
    if s == 0:
        return 0.0
    neg = s < 0
    m = -s if neg else s
    ev = x + m.bit_length() - 1
    ulp = max(ev, -126) - 23
    r = ulp - x
    if r <= 0:
        q = m << -r
    else:
        q = m >> r
        rem = m - (q << r)
        half = 1 << (r - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    if ulp > 200:
        return -math.inf if neg else math.inf
    v = math.ldexp(float(q), ulp)
    with np.errstate(over="ignore"):
        f = float(np.float32(v))
    return -f if neg else f


def exact_range(p: Prepared, c: np.ndarray, k0: int, k1: int) -> np.ndarray:
    c = np.asarray(c, dtype=np.float32)
    m, n = c.shape
    bsz = p.block_size or (k1 - k0) or 1
    total = np.zeros((m, n), dtype=object)
    x0: int | None = None
    blocks = []
    for s in range(k0, k1, bsz):
        av, fa = _int_values(p.a, s, s + bsz)
        bv, fb = _int_values(p.b, s, s + bsz)
        blk = _int_matmul(av, bv)
        ex = -(fa + fb)
        if p.sa is not None and p.sb is not None:
            j = s // bsz
            sa, sb = p.sa.rows(0, None), p.sb.rows(0, None)
            smag = sa.mag[:, j][:, None].astype(object) * sb.mag[:, j][None, :].astype(object)
            sexp = sa.exp[:, j][:, None].astype(np.int64) + sb.exp[:, j][None, :] - (sa.man + sb.man)
            sexp = np.where((sa.mag[:, j][:, None] == 0) | (sb.mag[:, j][None, :] == 0), 0, sexp)
            blocks.append((blk.astype(object) * smag, ex + sexp))
        else:
            blocks.append((blk.astype(object), np.full((m, n), ex, dtype=np.int64)))
    c_sgn, c_sig, c_exp, c_cls = split_f32(c)
    blocks.append((c_sig.astype(object) * c_sgn.astype(object), c_exp.astype(np.int64) - 23))
    x0 = int(min(int(x.min()) for _, x in blocks)) if blocks else 0
    for v, x in blocks:
        total = total + v * np.frompyfunc(lambda e: 1 << int(e - x0), 1, 1)(x)
    with np.errstate(over="ignore"):
        out = np.frompyfunc(lambda s: round_int_f32(int(s), x0), 1, 1)(total).astype(np.float32)
    # specials, by IEEE rules
    sp = _specials(p, c_cls, c_sgn, k0, k1)
    if sp is not None:
        out = np.where(sp[0], sp[1], out).astype(np.float32)
    return out


def _specials(p: Prepared, c_cls: np.ndarray, c_sgn: np.ndarray, k0: int, k1: int
              ) -> tuple[np.ndarray, np.ndarray] | None:
    from .step import _specials as nv_specials

    a, b = p.a.slice_k(k0, k1), p.b.slice_k(k0, k1)
    if p.sa is not None and p.sb is not None and p.block_size:
        from .gemm import _nan_blocks
        b0, b1 = k0 // p.block_size, k1 // p.block_size
        a = _nan_blocks(a, p.sa.slice_k(b0, b1), p.block_size)
        b = _nan_blocks(b, p.sb.slice_k(b0, b1), p.block_size)
    return nv_specials(a, b, c_cls, c_sgn)

