"""The model-family tolerance: how far from the exact answer any matrix unit of the
published family can land, for a device whose unit is not one of the named ones.

The family (Fasi et al. 2021; Khattak-Mikaitis; MMA-Sim): each step fuses L >= 8
products and C, aligns them to an exponent e_max no larger than the largest alignment
exponent of its terms (or e_zero >= -139 when a term is zero), keeps F >= 13 fraction
bits below it (truncating or rounding down, so each term loses less than
2^(e_max - 13), and never more than its own magnitude), and rounds the step's result
to at least 13 fraction bits (a relative error below 2^-13, plus at most 2^-139 below
fp32's normal range). With K products in ceil(K / 8) steps, E the largest alignment
exponent of any product or of C (and of the running sum, bounded by S = |C| + sum |a_k b_k|):

    bound = sum_k min(|a_k b_k|, 2^(E - 13)) + steps * (2^(E - 13) + 2^-13 * S + 2^-138)
            + 2^-24 * S                        (the exact reference's own rounding)

Units outside the family: the fp16-output forms (``rne_fp16``: each step rounds to 10
fraction bits) and AMD CDNA2's flush-to-zero adds (``ftz``: results below 2^-126 are
lost); :func:`in_family` says which. L < 8 (Volta, CDNA1/2, the K=4 forms) stays inside:
twice the steps, each losing far less than the budget above.

The fma units (fp32 / fp64 FMA chains) are outside the family too: their operands are
fp32 / fp64 patterns, not table formats. Their own bound is :func:`fma_bound`, the
classical one for K FMAs in a chain (Higham, "Accuracy and Stability of Numerical
Algorithms", 2nd ed., section 3.1, with each FMA one rounding): with u = 2^-24 (fp32) or
2^-53 (fp64), eta = 2^-150 or 2^-1074 (at least half the smallest subnormal, the most a
rounding below the normal range loses; 2^-1075 itself is no float64) and S = |C| + sum |a_k b_k|,

    bound = gamma_K * S + (K + 1) * eta + u * S,   gamma_K = K u / (1 - K u)

(the last terms the exact reference's own rounding). Where S passes the largest finite
value / 2 the bound is +Inf, and NaN where an operand or C is NaN/Inf.

Where S reaches 2^127 a step of some unit can overflow to +-Inf part way along K, and
the bound is +Inf (any result). Where an operand, a scale or C is NaN/Inf the bound is
NaN: the exact special result is asked for. All named units land within it (tests/
test_mma.py); it is far looser than bit-exactness, which a named unit's file asks.
"""

from __future__ import annotations

import math

import numpy as np

from .arith import FINITE, IEEE_FORMATS, canonical_operand_format, operand_table

__all__ = ["family_bound", "fma_bound", "in_family", "F_MIN", "L_MIN"]

F_MIN = 13  # the fewest fraction bits any unit of the family keeps (Hopper / Ada FP8)
L_MIN = 8  # the fewest products per step (CDNA3 fp16/bf16)


def in_family(unit: object) -> bool:
    """Whether a unit (a :class:`fmtsim.mma.Unit`) lands within :func:`family_bound`."""
    return getattr(unit, "output", "") != "rne_fp16" and getattr(unit, "family", "") not in ("ftz", "fma")


def fma_bound(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: str) -> np.ndarray:
    """The bound above (float64 (M, N)) for a chain of K exactly rounded FMAs: a, b fp32 /
    fp64 bit patterns (``fmt``), c the fp32 / fp64 accumulator."""
    udt, fdt = IEEE_FORMATS[canonical_operand_format(fmt)]
    av = np.ascontiguousarray(np.asarray(a).astype(udt)).view(fdt).astype(np.float64)
    bv = np.ascontiguousarray(np.asarray(b).astype(udt)).view(fdt).astype(np.float64)
    cc = np.asarray(c, np.float64)
    k = av.shape[1]
    u, eta, top = (2.0**-53, 2.0**-1074, 2.0**1023) if fdt == np.float64 else (2.0**-24, 2.0**-150, 2.0**127)
    with np.errstate(invalid="ignore", over="ignore"):
        special = ~np.isfinite(av).all(1)[:, None] | ~np.isfinite(bv).all(0)[None, :] | ~np.isfinite(cc)
        fa, fb = np.where(np.isfinite(av), np.abs(av), 0.0), np.where(np.isfinite(bv), np.abs(bv), 0.0)
        s_abs = np.abs(np.where(np.isfinite(cc), cc, 0.0)) + (fa[:, :, None] * fb[None, :, :]).sum(1)
        gamma = k * u / (1 - k * u)
        bound = (gamma * s_abs + (k + 1) * eta + u * s_abs) * (1 + 2.0**-20)  # float64 evaluation: room
    bound = np.where(~np.isfinite(s_abs) | (s_abs >= top), np.inf, bound)
    return np.where(special & np.isfinite(bound), np.nan, bound)


def family_bound(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, a_format: str, b_format: str,
                 a_scales: np.ndarray | None = None, b_scales: np.ndarray | None = None,
                 scale_format: str | None = None, block_size: int | None = None) -> np.ndarray:
    """The family tolerance (float64 (M, N), an upper bound) for D = A @ B + C; NaN where an
    operand or C is NaN/Inf (the exact special result is asked for there)."""
    ta, tb = operand_table(canonical_operand_format(a_format)), operand_table(canonical_operand_format(b_format))
    A, B = np.asarray(a), np.asarray(b)
    m, k = A.shape
    n = B.shape[1]
    cc = np.zeros((m, n), np.float32) if c is None else np.asarray(c, np.float32)
    av, bv = ta.values[A], tb.values[B]
    ae = np.where(ta.sig[A] != 0, ta.exp[A], -(1 << 20)).astype(np.float64)
    be = np.where(tb.sig[B] != 0, tb.exp[B], -(1 << 20)).astype(np.float64)
    special = (ta.cls[A] != FINITE).any(1)[:, None] | (tb.cls[B] != FINITE).any(0)[None, :] | ~np.isfinite(cc)
    if a_scales is not None and b_scales is not None and scale_format and block_size:
        ts = operand_table(canonical_operand_format(scale_format))
        sa = np.asarray(a_scales) & (0x7F if ts.name == "ue4m3" else 0xFF)
        sb = np.asarray(b_scales) & (0x7F if ts.name == "ue4m3" else 0xFF)
        idx = np.arange(k) // block_size
        av = av * ts.values[sa][:, idx]
        bv = bv * ts.values[sb][idx, :]
        ae = ae + np.where(ts.sig[sa] != 0, ts.exp[sa], 0)[:, idx]
        be = be + np.where(ts.sig[sb] != 0, ts.exp[sb], 0)[idx, :]
        special |= (ts.cls[sa] != FINITE).any(1)[:, None] | (ts.cls[sb] != FINITE).any(0)[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        prods = np.abs(np.where(np.isfinite(av), av, 0)[:, :, None] * np.where(np.isfinite(bv), bv, 0)[None, :, :])
        s_abs = np.abs(cc.astype(np.float64)) + prods.sum(1)
        e_prod = (ae[:, :, None] + be[None, :, :]).max(1)
        e_sum = np.floor(np.log2(np.where(s_abs > 0, s_abs, 2.0**-200))) + 1
        e_top = np.maximum(np.maximum(e_prod, e_sum), -139)
        unit = np.exp2(e_top - F_MIN)
        steps = math.ceil(max(k, 1) / L_MIN)
        bound = (np.minimum(prods, unit[:, None, :]).sum(1) + steps * (unit + 2.0**-F_MIN * s_abs + 2.0**-138)
                 + 2.0**-24 * s_abs)
    bound = bound * (1 + 2.0**-20)  # float64 evaluation of an upper bound: leave room
    # a running sum that can pass fp32's range can overflow in some unit's chain: any result
    bound = np.where(s_abs >= 2.0**127, np.inf, bound)
    return np.where(special & np.isfinite(bound), np.nan, bound)
