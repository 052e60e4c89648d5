"""One fused step of a matrix unit, exactly, in integer arithmetic, vectorised over
outputs (fast path; the one-output-at-a-time Fraction twin is :mod:`fmtsim.mma.slow`).

Every function here takes one step's operands already split by
:func:`fmtsim.mma.arith.operand_table` (per row of A and per column of B, K along the
last axis of both) and the accumulator C (float32, one per output), and returns the
step's float32 result. Widths: a product significand times 2^(F - P) is below
2^(F + 2), and every term is shifted to the largest exponent minus F before the sum,
so each term is below 2^(F + 2) (F = 35, grouped: 2^47) and a sum of at most 65 terms
fits int64; nothing wider is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arith import FINITE, INF, NAN, round_scaled, split_f32, to_f32
from .units import Unit

__all__ = ["Side", "nv_step", "grouped_step", "amd_step", "ftz_step", "finish_output"]

# output -> (fraction bits, rounding, smallest normal exponent, magnitude that overflows to Inf)
_OUT = {"rz_fp32": (23, "rz", -126, 2.0**128), "rz_e8m13": (13, "rz", -126, 2.0**128),
        "rne_fp32": (23, "rne", -126, 2.0**128), "rne_fp16": (10, "rne", -14, 2.0**16)}


@dataclass
class Side:
    """One operand of a step, split: (rows, L) for A, (cols, L) for B (B transposed).

    sgn: +1/-1 (int32), mag: integer significand (int64, 0 for zeros and specials),
    exp: alignment exponent (int32; ZERO_EXP for zeros), cls: FINITE/INF/NAN (int8).
    man: fraction bits of mag (the value is sgn * mag * 2^(exp - man)); emin: the
    format's smallest exponent."""

    sgn: np.ndarray
    mag: np.ndarray
    exp: np.ndarray
    cls: np.ndarray
    man: int
    emin: int = 0


def _specials(a: Side, b: Side, c_cls: np.ndarray, c_sgn: np.ndarray,
              extra_inf: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """(is_special, value) for outputs that are NaN or +-Inf by IEEE rules (NaN operand,
    Inf times 0, Inf of both signs, Inf/NaN C); None when the step has none."""
    a_sp = a.cls != FINITE
    b_sp = b.cls != FINITE
    if not (a_sp.any() or b_sp.any() or (c_cls != FINITE).any() or (extra_inf is not None and extra_inf.any())):
        return None
    a_nan = (a.cls == NAN)[:, None, :]
    b_nan = (b.cls == NAN)[None, :, :]
    a_inf = (a.cls == INF)[:, None, :]
    b_inf = (b.cls == INF)[None, :, :]
    a_zero = ((a.cls == FINITE) & (a.mag == 0))[:, None, :]
    b_zero = ((b.cls == FINITE) & (b.mag == 0))[None, :, :]
    nan = (a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)).any(-1)
    inf = (a_inf | b_inf) & ~(a_zero | b_zero | a_nan | b_nan)
    if extra_inf is not None:
        inf = inf | extra_inf
    neg = (a.sgn[:, None, :] * b.sgn[None, :, :]) < 0
    pos_inf = (inf & ~neg).any(-1) | ((c_cls == INF) & (c_sgn > 0))
    neg_inf = (inf & neg).any(-1) | ((c_cls == INF) & (c_sgn < 0))
    nan = nan | (c_cls == NAN) | (pos_inf & neg_inf)
    special = nan | pos_inf | neg_inf
    val = np.where(nan, np.float32(np.nan), np.where(pos_inf, np.float32(np.inf), np.float32(-np.inf)))
    return special, val.astype(np.float32)


def finish_output(neg: np.ndarray, mag: np.ndarray, x: np.ndarray, output: str) -> np.ndarray:
    man, mode, emin, top = _OUT[output]
    q, e = round_scaled(neg, mag, x, man, emin, mode)
    out = to_f32(neg, q, e)
    if top < 2.0**128:  # fp16: a rounded magnitude of 2^16 or more is +-Inf
        out = np.where(np.abs(out) >= top, np.where(neg, -np.inf, np.inf), out).astype(np.float32)
    return out


def _c_term(c_sgn: np.ndarray, c_sig: np.ndarray, c_exp: np.ndarray, emax: np.ndarray, f: int) -> np.ndarray:
    """C aligned like a product: trunc(c_sig * 2^(c_exp - emax + F - 23)), signed."""
    sh = (c_exp.astype(np.int64) - emax) + (f - 23)
    t = np.where(sh >= 0, c_sig << np.clip(sh, 0, 63), c_sig >> np.clip(-sh, 0, 63))
    return t * c_sgn


_SLAB = 1 << 19  # bytes of one slab of terms: it and its exponents stay in a 2-core machine's L2


def nv_step(unit: Unit, a: Side, b: Side, c: np.ndarray, c_emin: int = -126) -> np.ndarray:
    """NVIDIA FDPA: products and C aligned together to the largest exponent, truncated
    toward zero to F bits below it (zeros get e_zero), summed exactly, rounded by
    unit.output. c_emin: C's exponent is clamped there (-14 for an fp16 C).

    The terms and their sum: :func:`aligned_sums`."""
    f = unit.fraction_bits
    c32 = np.ascontiguousarray(c, dtype=np.float32)
    cbits = c32.view(np.uint32)
    cef = ((cbits >> 23) & 0xFF).astype(np.int32)
    c_nz = (cef != 255) & ((cbits & 0x7FFFFFFF) != 0)
    c_exp = np.maximum(cef - 127, max(-126, c_emin))  # a subnormal C has exponent -126 (then clamped)
    a_nz, b_nz = a.mag != 0, b.mag != 0
    big = 1 << 30
    lo_a, lo_b = _lowest_exponent(a, a_nz), _lowest_exponent(b, b_nz)
    if unit.e_zero < c_emin and unit.e_zero < lo_a + lo_b:
        # e_zero lies below C's clamped exponent and below every real product's, so it sets
        # the alignment point only where there is nothing else (all products and C zero)
        floor = np.where(c_nz, c_exp, unit.e_zero)
    else:
        # some product is zero iff a's row or b's column holds a zero (or a NaN/Inf, whose mag is 0)
        any_zero = ~a_nz.all(1)[:, None] | ~b_nz.all(1)[None, :]
        floor = np.where(any_zero | ~c_nz, unit.e_zero, -big)
        floor = np.where(c_nz, np.maximum(floor, c_exp), floor)
    s, emax = aligned_sums(a, b, f, floor, a_nz, b_nz, (lo_a, lo_b))
    ct = np.where(c_nz, c32, np.float32(0)).astype(np.float64)  # C aligned like a product (exact: a power of two)
    ct *= np.ldexp(1.0, (f - emax).astype(np.int32))
    s += np.trunc(ct, out=ct)
    out = _finish_exact_float(s, emax - f, unit.output)
    if a.cls.any() or b.cls.any() or (cef == 255).any():  # FINITE is 0: some operand is NaN or Inf
        sp = _specials(a, b, np.where(cef == 255, np.where(cbits & 0x7FFFFF, NAN, INF), FINITE),
                       np.where(cbits >> 31, -1, 1))
        if sp is not None:
            out = np.where(sp[0], sp[1], out)
    return out


def _lowest_exponent(side: Side, nz: np.ndarray) -> int:
    """The smallest exponent of a nonzero element (2^30 when there is none)."""
    return int(np.where(nz, side.exp, 1 << 30).min(initial=1 << 30))


def aligned_sums(a: Side, b: Side, f: int, floor: np.ndarray | None, a_nz: np.ndarray | None = None,
                 b_nz: np.ndarray | None = None, lows: tuple[int, int] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(s, e_max) over the products of a and b: e_max = the largest a.exp + b.exp of a
    nonzero product (or -2^30 where none), raised to ``floor`` where given, and
    s = sum_k trunc(a_k b_k 2^(F - e_max)), exact integers held in float64; both (rows, cols).
    a_nz, b_nz, lows (the smallest exponents of a's and b's nonzero elements): passed when the
    caller has them.

    The alignment runs in floating point, exactly: a product of two values narrower than
    12 bits, times a power of two, is exact in float32 (of anything narrower than 27 bits
    in float64), and the terms are integers below 2^(F + 4). Their sum is exact in float32
    while it stays below 2^24 (F = 13); else, when the products are exact in float32 and the
    terms fit int32 (F = 24 or 25 with 8-bit operands), the truncation is the float32 -> int32
    conversion and the terms are summed in int32 in chunks short enough not to overflow; else
    (wider operands, or F beyond 29 as in the probe grid) everything is float64. The largest
    exponents come from one float64 matrix product (:func:`_largest_exponents`), so each
    product costs four passes: outer product, scale, truncate, sum."""
    rows, L = a.mag.shape
    cols = b.mag.shape[0]
    big = 1 << 30
    a_nz = a.mag != 0 if a_nz is None else a_nz
    b_nz = b.mag != 0 if b_nz is None else b_nz
    lo_a, lo_b = lows if lows is not None else (_lowest_exponent(a, a_nz), _lowest_exponent(b, b_nz))
    lo = min(lo_a, lo_b, 0)
    hi = max(int(a.exp.max(initial=0)), int(b.exp.max(initial=0)))  # a zero's exponent is ZERO_EXP
    small = -21 <= lo and hi <= 21
    # bits of the largest term: |a_k b_k| 2^(F - e_max) < 2^(F + top_a + top_b)
    top_a, top_b = _top_bits(a), _top_bits(b)
    top = f + top_a + top_b
    prod32 = small and (a.man + top_a) + (b.man + top_b) <= 24  # products exact in float32
    sum32 = prod32 and top + L.bit_length() <= 24
    # terms below 2^top fit int32 while top <= 31, and 2^(31 - top) of them sum without overflow
    int32_terms = prod32 and not sum32 and top <= 31
    chunk = 1 << max(0, 31 - top)  # terms per int32 partial sum
    fdt = np.float32 if sum32 or int32_terms else np.float64
    av = np.ascontiguousarray((a.sgn * np.ldexp(a.mag.astype(np.float64), a.exp - a.man)).astype(fdt).T)
    bv = np.ascontiguousarray((b.sgn * np.ldexp(b.mag.astype(np.float64), b.exp - b.man)).astype(fdt).T)
    emax = _largest_exponents(a, b, a_nz, b_nz, small, -big)
    if floor is not None:
        emax = np.maximum(emax, floor)
    # 2^(F - e_max) built from its bits; e_max is held at 2 lo or above (every product zero:
    # the scale stays finite and 0 * scale = 0), so the biased exponent stays in range
    ibits, bias, ut = (23, 127, np.int32) if fdt is np.float32 else (52, 1023, np.int64)
    scale = ((bias + f - np.maximum(emax, 2 * lo)).astype(ut) << ibits).view(fdt)
    s = np.empty((rows, cols), np.float64)
    r = max(1, _SLAB // np.dtype(fdt).itemsize // max(1, cols * L))
    p_buf = np.empty((L, r, cols), fdt)
    i_buf = np.empty((L, r, cols), np.int32) if int32_terms else None
    for r0 in range(0, rows, r):
        r1 = min(rows, r0 + r)
        n = r1 - r0
        p = p_buf[:, :n]
        # the outer products: numpy's einsum loop is several times faster here than a
        # broadcast multiply (whose float loop does not vectorise with a zero stride)
        np.einsum("lr,lc->lrc", av[:, r0:r1], bv, out=p)
        np.multiply(p, scale[r0:r1], out=p)
        if not int32_terms:
            np.trunc(p, out=p)
            s[r0:r1] = p.sum(0, dtype=fdt)
        else:
            t = i_buf[:, :n]  # type: ignore[index]
            np.copyto(t, p, casting="unsafe")  # float -> int conversion truncates toward zero
            acc = np.einsum("lrc->rc", t[:chunk]).astype(np.float64)
            for k0 in range(chunk, L, chunk):
                acc += np.einsum("lrc->rc", t[k0:k0 + chunk])
            s[r0:r1] = acc
    return s, emax


def _top_bits(side: Side) -> int:
    """Bits of the largest significand above the binary point: |value| < 2^(exp + top)."""
    m = int(side.mag.max(initial=0))
    return max(0, m.bit_length() - side.man)


def _largest_exponents(a: Side, b: Side, a_nz: np.ndarray, b_nz: np.ndarray, small: bool, none: int
                       ) -> np.ndarray:
    """max over k of a.exp[i, k] + b.exp[j, k] over the nonzero products (``none`` where
    there is none), (rows, cols) int64.

    Small exponents (|e| <= 21): one float64 matrix product, exactly. With W = 2^w > L,
    sum_k W^(ea_k + eb_k) lies in [W^e_max, L W^e_max] (its terms are powers of two, a sum
    of positive terms is never below its largest, and its rounding error is far below the
    gap to W^(e_max + 1)), so e_max = floor(log2(sum) / w). Otherwise int16 exponent sums,
    slab by slab."""
    rows, L = a.mag.shape
    cols = b.mag.shape[0]
    w = 1 << (L.bit_length() - 1).bit_length()  # 2^w > L, w a power of two (a shift divides by it)
    if small and w * 42 < 1000:  # W^(2 * 21) stays inside float64
        wa = np.where(a_nz, np.ldexp(1.0, (w * a.exp).astype(np.int32)), 0.0)
        wb = np.where(b_nz, np.ldexp(1.0, (w * b.exp).astype(np.int32)), 0.0)
        wbt = np.ascontiguousarray(wb.T)
        tot = np.empty((rows, cols))
        # blocks of at most 2^18 multiply-adds, which OpenBLAS runs on one thread: its
        # threads spin-wait, which costs more than they save on a loaded machine
        rb = max(1, (1 << 18) // max(1, L * cols))
        for r0 in range(0, rows, rb):
            np.matmul(wa[r0:r0 + rb], wbt, out=tot[r0:r0 + rb])
        # floor(log2(tot)) is tot's unbiased exponent field (tot >= 2^-(2 * 21 * w) is normal)
        ep = ((tot.view(np.int64) >> 52) - 1023) >> (w.bit_length() - 1)
        return np.where(tot > 0, ep, none)
    zero, none_below = -16000, -8000  # a zero operand's exponent: its sums stay below every real sum
    aexp = np.ascontiguousarray(np.where(a_nz, a.exp, zero).astype(np.int16).T)
    bexp = np.ascontiguousarray(np.where(b_nz, b.exp, zero).astype(np.int16).T)
    out = np.empty((rows, cols), np.int64)
    r = max(1, _SLAB // 2 // max(1, cols * L))
    e_buf = np.empty((L, r, cols), np.int16)
    for r0 in range(0, rows, r):
        r1 = min(rows, r0 + r)
        e = e_buf[:, :r1 - r0]
        np.add(aexp[:, r0:r1, None], bexp[:, None, :], out=e)
        ep = e.max(0).astype(np.int64)  # int64 before ``none`` joins (it does not fit int16)
        out[r0:r1] = np.where(ep <= none_below, none, ep)
    return out


_RZ_BITS = {"rz_fp32": 23, "rz_e8m13": 13}


def _finish_exact_float(s: np.ndarray, x: np.ndarray, output: str) -> np.ndarray:
    """Round s * 2^x (s: integers held exactly in float64) by ``output``. Toward zero in
    float64 directly: the value is exact there, and truncating its significand to the
    output's bits (or, below 2^-126, to the fixed subnormal grid) is the rounding."""
    man = _RZ_BITS.get(output)
    if man is None:
        neg = s < 0
        return finish_output(neg, np.abs(s).astype(np.int64), x.astype(np.int64), output)
    v = np.ldexp(s, x.astype(np.int32))
    mask = np.uint64((1 << 64) - (1 << (52 - man)))
    t = (v.view(np.uint64) & mask).view(np.float64)
    tiny = np.abs(v) < 2.0 ** -126
    if tiny.any():
        g = 126 + man
        t = np.where(tiny, np.trunc(v * 2.0 ** g) * 2.0 ** -g, t)
    with np.errstate(over="ignore"):
        return t.astype(np.float32) + np.float32(0)  # + 0: a zero result is +0


def _flush(x: np.ndarray, keep_sign: bool) -> np.ndarray:
    """float32 values below 2^-126 in magnitude to zero (signed when keep_sign, else +0)."""
    tiny = np.abs(x) < np.float32(2.0**-126)
    zero = (x * np.float32(0)) if keep_sign else np.zeros_like(x)
    return np.where(tiny, zero, x).astype(np.float32)


def ftz_step(unit: Unit, a: Side, b: Side, c: np.ndarray) -> np.ndarray:
    """AMD CDNA2 MFMA: subnormal inputs and C flushed to +0, each product rounded to fp32
    (nearest even; IEEE float32 arithmetic, as the hardware's multipliers), results below
    2^-126 flushed keeping their sign; then per unit.k (2 or 4) products: pairs added,
    the pairs' sums added (k = 4), and that sum added to C, each addition an fp32 RNE add
    flushed likewise."""
    def values(side: Side) -> np.ndarray:
        v = side.sgn * np.ldexp(side.mag.astype(np.float64), (side.exp - side.man).astype(np.int32))
        v = np.where(side.cls == NAN, np.nan, np.where(side.cls == INF, side.sgn * np.inf, v))
        v = np.where(side.mag == 0, np.where(side.cls == FINITE, 0.0, v), v)  # zeros: ZERO_EXP, +0 (sign below)
        v = np.where((side.cls == FINITE) & (side.exp <= side.emin) & (side.mag < (1 << side.man)), 0.0, v)
        return v.astype(np.float32)  # exact: fp16 / bf16 values; subnormals already +0

    av, bv = values(a), values(b)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        p = _flush(av[:, None, :] * bv[None, :, :], True)
        acc = _flush(np.asarray(c, np.float32), False)
        for i in range(0, p.shape[-1], unit.k):
            s = _flush(p[..., i] + p[..., i + 1], True)
            if unit.k == 4:
                s = _flush(s + _flush(p[..., i + 2] + p[..., i + 3], True), True)
            acc = _flush(acc + s, True)
    return acc.astype(np.float32)


def grouped_step(unit: Unit, a: Side, b: Side, c: np.ndarray, sa: Side, sb: Side, groups_per_block: int
                 ) -> np.ndarray:
    """NVIDIA mxf4 / mxf4nvf4: groups of unit.group products summed exactly (an integer
    matmul, exact in float32), each times its scale product, aligned on the scale
    product's exponent (e_zero when the group's products are all zero or the scale is
    zero) together with C, truncated to F bits, summed, rounded by unit.output.

    sa: (rows, n_blocks) scales of A, sb: (cols, n_blocks) scales of B."""
    f = unit.fraction_bits
    g = unit.group
    rows, L = a.mag.shape
    cols = b.mag.shape[0]
    ng = L // g
    c_sgn, c_sig, c_exp, c_cls = split_f32(c)
    # element values in units of 2^(emin - man): small signed integers
    av = (a.sgn * (a.mag << np.clip(a.exp - a.emin, 0, 31))).astype(np.float32)
    bv = (b.sgn * (b.mag << np.clip(b.exp - b.emin, 0, 31))).astype(np.float32)
    av = np.where(a.mag == 0, 0, av).astype(np.float32)
    bv = np.where(b.mag == 0, 0, bv).astype(np.float32)
    psum = np.einsum("mgk,ngk->mng", av.reshape(rows, ng, g), bv.reshape(cols, ng, g))
    nz = np.einsum("mgk,ngk->mng", (a.mag != 0).reshape(rows, ng, g).astype(np.float32),
                   (b.mag != 0).reshape(cols, ng, g).astype(np.float32))
    p = psum.astype(np.int64)  # exact: |p| <= 16 * 144
    sai = np.repeat(np.arange(sa.mag.shape[1]), groups_per_block)
    smag = sa.mag[:, sai][:, None, :] * sb.mag[:, sai][None, :, :]
    sexp = (sa.exp[:, sai][:, None, :] + sb.exp[:, sai][None, :, :]).astype(np.int64)
    zero_group = (nz == 0) | (smag == 0)
    e = np.where(zero_group, unit.e_zero, sexp)
    emax = np.maximum(e.max(-1), np.where(c_sig != 0, c_exp, unit.e_zero))
    # value of a group: p * smag * 2^(e - P) with P the fraction bits of p and of smag
    frac = (a.man - a.emin) + (b.man - b.emin) + sa.man + sb.man
    shift = f - frac
    assert shift >= 0
    d = emax[..., None] - e
    t = (np.abs(p) * smag) << shift
    t = (t >> np.clip(d, 0, 63)) * np.sign(p)
    s = t.sum(-1) + _c_term(c_sgn, c_sig, c_exp, emax, f)
    out = finish_output(s < 0, np.abs(s), emax - f, unit.output)
    sp = _specials(a, b, c_cls, c_sgn)
    if sp is not None:
        out = np.where(sp[0], sp[1], out)
    return out


def amd_step(unit: Unit, a: Side, b: Side, c: np.ndarray) -> np.ndarray:
    """AMD CDNA3 MFMA: products aligned and truncated per group (F bits; even and odd
    products apart when unit.even_odd, then combined rounding down), C joined rounding
    down (products to F2 + 1 bits, C to F bits; C below e_max - F - 1 dropped when
    unit.drop_small_c), the sum rounded down to F2 bits and then to nearest even fp32."""
    f, f2 = unit.fraction_bits, unit.fraction_bits2
    shift = f - a.man - b.man
    assert shift >= 0
    c_sgn, c_sig, c_exp, c_cls = split_f32(c)
    parts = [slice(0, None, 2), slice(1, None, 2)] if unit.even_odd else [slice(None)]
    extra_inf = None
    sums, exps = [], []
    if not unit.product_overflow_inf:
        # each group's truncated sum as the nv units', in floating point (aligned_sums):
        # (a.mag << shift) * b.mag >> (g_max - e_k) is trunc(|p_k| 2^(F - g_max)), signed
        for sl in parts:
            ga = Side(a.sgn[:, sl], a.mag[:, sl], a.exp[:, sl], a.cls[:, sl], a.man, a.emin)
            gb = Side(b.sgn[:, sl], b.mag[:, sl], b.exp[:, sl], b.cls[:, sl], b.man, b.emin)
            s, gmax = aligned_sums(ga, gb, f, None)
            sums.append(s.astype(np.int64))
            exps.append(gmax.astype(np.int64))
    else:
        sums, exps, extra_inf = _amd_group_sums(unit, a, b, shift, parts)
    edot = exps[0]
    for x in exps[1:]:
        edot = np.maximum(edot, x)
    sdot = sum(s >> np.clip(edot - x, 0, 63) for s, x in zip(sums, exps, strict=True))
    emax = np.maximum(edot, c_exp)
    k = edot - emax + (f2 + 1 - f)
    sdot = np.where(k >= 0, sdot << np.clip(k, 0, 63), sdot >> np.clip(-k, 0, 63))
    cs = c_sig * c_sgn
    kc = c_exp.astype(np.int64) - emax + (f - 23)
    sc = np.where(kc >= 0, cs << np.clip(kc, 0, 63), cs >> np.clip(-kc, 0, 63))
    if unit.drop_small_c:
        sc = np.where(c_exp < emax - f - 1, 0, sc)
    total = sdot + (sc << (f2 + 1 - f))
    if total.size and int(np.abs(total).max()) < (1 << 53):
        out = _rd_then_rne32(total, emax - f2 - 1, f2)
    else:
        neg = total < 0
        q, x = round_scaled(neg, np.abs(total), emax - f2 - 1, f2, -126, "rd")
        q, x = round_scaled(neg, q, x, 23, -126, "rne")
        out = to_f32(neg, q, x)
    sp = _specials(a, b, c_cls, c_sgn, extra_inf)
    if sp is not None:
        out = np.where(sp[0], sp[1], out)
    return out


def _amd_group_sums(unit: Unit, a: Side, b: Side, shift: int, parts: list[slice]
                    ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """CDNA3 fp16/bf16, in int64: the groups' truncated sums and largest exponents, with
    products of 2^128 or more left out (returned as the +-Inf mask)."""
    e = (a.exp[:, None, :] + b.exp[None, :, :]).astype(np.int64)
    mag = (a.mag[:, None, :] << shift) * b.mag[None, :, :]
    sgn = (a.sgn[:, None, :] * b.sgn[None, :, :]).astype(np.int64)
    big = (e + (mag >= (np.int64(1) << (unit.fraction_bits + 1)))) >= 128
    big &= mag != 0
    mag = np.where(big, 0, mag)
    sums, exps = [], []
    for sl in parts:
        eg = e[..., sl]
        gmax = eg.max(-1)
        t = (mag[..., sl] >> np.clip(gmax[..., None] - eg, 0, 63)) * sgn[..., sl]
        sums.append(t.sum(-1))
        exps.append(gmax)
    return sums, exps, big


def _rd_then_rne32(total: np.ndarray, x: np.ndarray, f2: int) -> np.ndarray:
    """total * 2^x (|total| < 2^53) rounded toward -Inf to f2 fraction bits (smallest normal
    exponent -126), then to nearest even fp32, as float32 (+0 for a zero): in float64,
    where total * 2^x is exact; the first rounding is a floor on the grid 2^(max(E, -126) - f2)
    (E: the value's exponent field), the second float32's own conversion (IEEE RNE, its
    subnormal grid 2^-149 and overflow to +-Inf are the fp32 rounding's)."""
    v = np.ldexp(total.astype(np.float64), x.astype(np.int32))
    e = ((v.view(np.int64) >> 52) & 0x7FF) - 1023
    g = np.maximum(e, -126) - f2  # the grid's exponent; for v = 0 any grid gives 0
    up = ((1023 - g) << 52).view(np.float64)  # 2^-g and 2^g from their bits (both in range)
    down = ((1023 + g) << 52).view(np.float64)
    r = np.floor(v * up) * down
    with np.errstate(over="ignore"):
        return r.astype(np.float32) + np.float32(0)  # + 0: a zero result is +0
