"""An exact, independent oracle for integer-weight checkpoints: w = (q - zp) * s [* p] computed as
an integer times a power of two and rounded to nearest even in the target with integer arithmetic
(no fmtsim code, no float rounding), and the producers' int4 layouts unpacked nibble by nibble."""

import numpy as np

TARGETS = {"bfloat16": (8, -126, 127), "float16": (11, -14, 15), "float32": (24, -126, 127)}
REORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # Quark Pack_4_bits: the eight outputs of an int32 as nibbles 0..7 hold them


def mantissa24(x):
    """Float values with at most 24 significant bits (F32, BF16, F16) -> (int64 M, int E), x == M * 2^E."""
    x = np.asarray(x, np.float64)
    m, e = np.frexp(x)
    big = np.ldexp(m, 24).astype(np.int64)
    assert np.array_equal(np.ldexp(big.astype(np.float64), e - 24), x), "more than 24 significant bits"
    return big, (e - 24).astype(np.int64)


def round_scaled(n, e, target, d=None, neg=None):
    """n / d * 2^e (int64 arrays, |n| < 2^62; d > 0 or None for 1) rounded to nearest even in target ->
    float64 (the exact value of the result); ``neg`` gives zeros their sign."""
    p, emin, emax = TARGETS[target]
    n, e = np.broadcast_arrays(np.asarray(n, np.int64), np.asarray(e, np.int64))
    a = np.abs(n)
    sticky = np.zeros(a.shape, bool)
    if d is not None:  # a quotient: 54 more bits than the target needs, and whether anything is left
        d = np.broadcast_to(np.asarray(d, np.int64), a.shape)
        assert (a < 2**8).all(), "quotients are taken of FP4 x UE4M3 products only"
        a = a << 54
        e = e - 54
        a, r = np.divmod(a, d)
        sticky = r != 0
    bl = np.zeros(a.shape, np.int64)
    for k in range(63):
        bl += (a >> k) > 0
    top = bl - 1 + e
    u = np.maximum(top, emin) - p + 1  # exponent of the target ulp at this value
    shift = u - e
    exact = shift <= 0  # the value is a multiple of the target ulp: nothing to round
    sh = np.clip(shift, 1, 62)
    k = np.where(exact, a, np.where(shift > 62, 0, a >> sh))
    rem = a & ((np.int64(1) << sh) - 1)
    half = np.int64(1) << (sh - 1)
    assert not (exact & sticky).any()
    up = ~exact & (shift <= 62) & ((rem > half) | ((rem == half) & (sticky | (k % 2 == 1))))
    k = k + up
    kk, uu = k, np.where(exact, e, u)
    val = np.ldexp(kk.astype(np.float64), uu)
    val = np.where(val >= 2.0 ** (emax + 1), np.inf, val)
    negative = (n < 0) if neg is None else np.asarray(neg, bool)
    return np.where(negative, -val, val)


def e4m3(c):
    """OCP E4M3 codes -> (int64 M, int64 E, NaN mask, negative), value M * 2^E."""
    c = np.asarray(c).astype(np.int64)
    e, m = (c >> 3) & 15, c & 7
    return np.where(e == 0, m, 8 + m), np.where(e == 0, -9, e - 10), (c & 0x7F) == 0x7F, (c & 0x80) != 0


def e2m1(c):
    c = np.asarray(c).astype(np.int64)
    e, m = (c >> 1) & 3, c & 1
    return np.where(e == 0, m, 2 + m), np.where(e == 0, -1, e - 2), np.zeros(c.shape, bool), (c & 8) != 0


def unpack_nibbles(u, order=None, signed=True):
    """uint32 [..., n] -> int64 [..., 8n] nibbles (two's complement if signed); element 8j + order[k] from
    nibble k (bits 4k)."""
    order = order or tuple(range(8))
    out = np.zeros(u.shape[:-1] + (u.shape[-1], 8), np.int64)
    for k in range(8):
        nib = ((u >> np.uint32(4 * k)) & np.uint32(0xF)).astype(np.int64)
        out[..., order[k]] = np.where(signed & (nib >= 8), nib - 16, nib)
    return out.reshape(u.shape[:-1] + (-1,))


def int_codes(packing, raw, signed=True):
    """The producers' int layouts -> int64 [out, in]."""
    if packing == "byte":
        return raw.view(np.int8).astype(np.int64)
    if packing == "int4-rows":
        b = raw.view(np.uint8).astype(np.int64)
        lo, hi = b & 0xF, b >> 4
        out = np.empty((b.shape[0] * 2, b.shape[1]), np.int64)
        out[0::2] = np.where(lo >= 8, lo - 16, lo)
        out[1::2] = np.where(hi >= 8, hi - 16, hi)
        return out
    if packing == "int4x8-reorder-t":
        return unpack_nibbles(raw.view(np.uint32), REORDER, signed).T
    if packing == "int4x8-reorder":  # Quark per channel: not transposed; a 1-D zero point is one row
        u = raw.view(np.uint32)
        return unpack_nibbles(u.reshape(1, -1) if u.ndim == 1 else u, REORDER, signed)
    raise AssertionError(packing)


def expected_int(packing, codes, scale, zp, pre, target, group, signed=True, glob=None):
    """The exact values rounded once: float64 [out, in] (then cast exactly to the target dtype)."""
    q = int_codes(packing, codes, signed)
    rows, cols = q.shape
    s = np.asarray(scale).astype(np.float64)
    if s.size == 1:
        s = np.full((rows, 1), s.reshape(-1)[0])
    elif packing == "int4x8-reorder-t":
        s = s.T
    s = s.reshape(rows, -1)
    if zp is not None:
        z = np.asarray(zp)
        if packing == "int4x8-reorder":  # [ceil(out/8)] words whatever the count: eight rows per word
            z = int_codes(packing, z.reshape(1, -1), signed).reshape(-1)[:rows].reshape(rows, 1)
        elif packing == "int4x8-reorder-t":  # [groups, ceil(out/8)]
            z = int_codes(packing, z.reshape(s.shape[1], -1), signed)[:rows]
        elif z.size == 1:
            z = np.full((rows, 1), int(z.reshape(-1)[0]), np.int64)
        else:
            z = z.astype(np.int64).reshape(rows, -1)
        q = q - np.repeat(z, group if z.shape[1] > 1 else cols, axis=1)[:, :cols]
    s_full = np.repeat(s, group if s.shape[1] > 1 else cols, axis=1)[:, :cols]
    ms, es = mantissa24(s_full)
    n = q * ms
    e = es
    if pre is not None:
        mp, ep = mantissa24(np.asarray(pre).astype(np.float64).reshape(1, -1))
        n = n * mp
        e = e + ep
    if glob is not None:  # a per-tensor multiplier (Quark int4_fp8): n stays below 2^62 (5 + 24 + 24 bits)
        mg, eg = mantissa24(np.asarray(glob).astype(np.float64).reshape(1, 1))
        n = n * mg
        e = e + eg
    return round_scaled(n, e, target)
