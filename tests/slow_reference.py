"""Independent slow references for the block-scaled schemes: one block at a time,
Python scalars and Fractions, elements through the exact oracle."""

from fractions import Fraction

import numpy as np

import fmtsim
from fmtsim.oracle import encode_one

EMAX = {"e4m3": 8, "e5m2": 15, "e3m2": 4, "e2m3": 2, "e2m1": 2, "mxint8": 0}


def floor_log2(v: Fraction) -> int:
    e = 0
    while Fraction(2) ** e > v:
        e -= 1
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    return e


def mx_block(values, elem, rule="floor", rounding="rne"):
    """(scale code, element codes) for one block of Python floats (float32 values)."""
    f = fmtsim.get_format(elem)
    if any(v != v or v in (float("inf"), float("-inf")) for v in values):
        return 0xFF, [0] * len(values)
    amax = max(abs(Fraction(v)) for v in values)
    if amax == 0:
        return 0x00, [0] * len(values)
    emax = EMAX[elem]
    if rule == "rceil":
        d = np.float32(np.float32(float(amax)) * np.float32(1.0 / float(f.max_finite)))
        d = Fraction(float(d))
        e = floor_log2(d)
        if Fraction(2) ** e != d:
            e += 1
        if d < Fraction(2) ** -127:  # E8M0 byte 0 is 2^-127: anything at or below it
            e = -127
    else:
        # float32 inputs: the exponent is read from the bit fields, so a subnormal amax
        # counts as exponent -127 and (for ceil) as having mantissa bits set
        e = max(floor_log2(amax), -127)
        if rule == "ceil" and (Fraction(2) ** e != amax):
            e += 1
        if rule == "even":
            mbits = f.precision - 1
            if amax < Fraction(2) ** -126:  # float32 subnormal: exponent field 0 until it carries
                e = -126 if amax >= Fraction(2) ** -126 - Fraction(2) ** (-127 - mbits) else -127
            else:  # round amax to mbits fraction bits, half up, then take its exponent
                step = Fraction(2) ** (e - mbits)
                r = (amax / step + Fraction(1, 2)).__floor__() * step
                e = floor_log2(r)  # 2^128 included: shared_exp 128 - emax is a finite scale
        e -= emax
    e = max(e, -127)
    if e > 127:
        return 0xFF, [0] * len(values)
    overflow = "satsym" if f.kind == "int" else "satfinite"
    codes = [encode_one(Fraction(v) / Fraction(2) ** e if v != 0 else float(v), elem, rounding, overflow,
                        "zero" if not f.has_nan else None)[0] for v in values]
    return e + 127, codes


def mx_reference(x2d, elem, rule="floor", rounding="rne", block=32):
    """x2d (rows, K) float32, blocked along the last axis."""
    scales, codes = [], []
    for row in x2d:
        srow, crow = [], []
        for i in range(0, len(row), block):
            s, c = mx_block([float(v) for v in row[i:i + block]], elem, rule, rounding)
            srow.append(s)
            crow.extend(c)
        scales.append(srow)
        codes.append(crow)
    return np.array(scales, np.uint8), np.array(codes, np.uint8)


def intq_reference(values, bits, symmetric, scale_dtype=np.float32):
    """(scale, zero point, codes) for one block, exact rounding with Fractions."""
    vals = [Fraction(float(v)) for v in values]

    def rne(q: Fraction) -> int:
        k = q.__floor__()
        rem = q - k
        return k + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2) else 0)

    def stored(wanted: float) -> float:
        # nearest in scale_dtype, but a subnormal that lies below the wanted scale goes one step up
        s = scale_dtype(wanted)
        if 0 < float(s) < np.finfo(scale_dtype).tiny and float(s) < wanted:
            s = np.nextafter(s, scale_dtype(np.inf))
        return float(s)

    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        amax = max(abs(v) for v in vals)
        s = stored(float(amax) / qmax) if amax else 1.0
        codes = [max(-qmax, min(qmax, rne(v / Fraction(s)))) for v in vals]
        return s, 0, codes
    top = 2**bits - 1
    lo, hi = min(min(vals), 0), max(max(vals), 0)
    s = stored(float(hi - lo) / top) if hi > lo else 1.0
    z = max(0, min(top, rne(-lo / Fraction(s))))
    codes = [max(0, min(top, rne(v / Fraction(s)) + z)) for v in vals]
    return s, z, codes


def nvfp4_block(values, recipe, g):
    """(scale code, element codes) for one 16-element block; ``g`` the global decode
    multiplier (float32). Every step a numpy float32 scalar op, in the recipe's order."""
    f32 = np.float32
    vals = [f32(v) for v in values]
    bmax = max(abs(v) for v in vals)
    e4m3 = fmtsim.get_format("e4m3")

    def e4m3_code(v):
        return encode_one(float(v), "e4m3")[0]

    if recipe == "te":
        enc = f32(f32(1.0) / f32(g))
        s = f32(bmax * f32(enc * f32(f32(1.0) / f32(6.0))))
        s = f32(min(max(s, f32(-448)), f32(448)))
        sc = e4m3_code(s)
        sv = f32(float(e4m3.code_value(sc)))
        with np.errstate(divide="ignore"):  # a zero block scale: 1 / 0 is Inf, clamped to max just below
            m = f32(min(f32(f32(1.0) / f32(sv * f32(g))), np.finfo(np.float32).max))
        scaled = [f32(v * m) for v in vals]
    else:
        s = f32(f32(bmax / f32(6.0)) / f32(g))
        s = f32(min(max(s, f32(2.0**-6)), f32(448)))
        sc = e4m3_code(s)
        sv = f32(float(e4m3.code_value(sc)))
        recip = f32(f32(f32(1.0) / f32(g)) / sv)
        scaled = [f32(v * recip) for v in vals]
    codes = []
    for v in scaled:
        v = f32(min(max(v, f32(-6)), f32(6)))
        if recipe == "te" and v == 0:
            c = 0  # TE's reference cast writes -0.0 as code 0; -0.1 still gives 0x8
        else:
            c = encode_one(float(v), "e2m1")[0]
        codes.append(c)
    return sc, codes
