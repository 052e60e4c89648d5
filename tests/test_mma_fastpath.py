"""The branches of the fast step (fmtsim.mma.step.aligned_sums) against the Fraction twin
(fmtsim.mma.slow): the largest exponents from the float64 matrix product (narrow formats)
and from int16 sums (wide ones), every product zero under a nonzero C, terms at the int32
bound of the F = 24/25 units, C far above or far below the products. Each case runs on the
numpy engine and on the default one (compiled for the nv units, where it builds)."""

import numpy as np
import pytest

from fmtsim.mma import UNITS, matmul, slow_matmul
from fmtsim.mma.arith import operand_table

from .conftest import slow_unless


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def check(unit, fa, fb, a, b, c):
    """Both engines (the numpy step, and the compiled one where it applies) against the twin."""
    kw = dict(unit=unit, a_format=fa, b_format=fb)
    slow = bits(slow_matmul(a, b, c, **kw))
    for engine in ("numpy", "auto"):
        fast = bits(matmul(a, b, c, engine=engine, **kw))
        assert np.array_equal(fast, slow), (engine, np.argwhere(fast != slow)[:3])


# (unit, format): narrow exponents (matrix-product path, float32 / int32 terms) and wide (int16 path)
UNITS_FORMATS = [("sm90_wgmma_fp8", "e4m3"), ("sm89_mma_fp8", "e5m2"), ("sm100_f8f6f4", "e4m3"),
                 ("cdna3_mfma_fp8", "e4m3fnuz"), ("sm90_wgmma_fp16", "bf16"), ("sm100_f16", "fp16")]


def _finite(fmt, rng, shape, limit=None):
    t = operand_table(fmt)
    ok = (t.cls == 0) & (t.sig != 0)
    if limit is not None:
        ok &= np.abs(t.exp) <= limit
    return rng.choice(np.nonzero(ok)[0], shape)


@pytest.mark.parametrize("unit,fmt", UNITS_FORMATS)
def test_zero_blocks_under_a_nonzero_c(unit, fmt, rng):
    """Whole steps of a row of A or a column of B zero: those outputs are C cut at C's own
    exponent (the int16 path once lost that: its 'no product' marker did not fit int16)."""
    L = UNITS[unit].k
    a, b = _finite(fmt, rng, (4, 3 * L)), _finite(fmt, rng, (3 * L, 5))
    a[1, :L] = 0
    a[2] = 0
    b[L:2 * L, 3] = 0
    b[:, 4] = 0
    c = (rng.standard_normal((4, 5)) * 2.0 ** rng.integers(-30, 30, (4, 5))).astype(np.float32)
    c[0, 0] = 0
    c[3, 4] = np.float32(2.0 ** -140)  # subnormal C, every product zero
    check(unit, fmt, fmt, a, b, c)


@pytest.mark.parametrize("unit,fmt", [("sm100_f8f6f4", "e4m3"), ("sm100_f8f6f4", "e2m1"),
                                      ("cdna3_mfma_fp8", "e4m3fnuz"), ("sm90_wgmma_fp8", "e4m3")])
def test_terms_at_the_int32_bound(unit, fmt, rng):
    """Every product the largest magnitude, one sign: a step's terms sum to about
    L * 2^(F + 2), beyond int32 for F = 25 (the sum runs in chunks)."""
    t = operand_table(fmt)
    fin = np.nonzero(t.cls == 0)[0]
    top = fin[np.argmax(np.where(t.values[fin] > 0, t.values[fin], 0))]
    L = UNITS[unit].k
    a = np.full((2, 2 * L), top)
    b = np.full((2 * L, 3), top)
    b[0, 1] = fin[np.argmin(t.values[fin])]  # one product of the other sign
    c = np.array([[0.0, 1.0, -(2.0 ** 40)], [2.0 ** -20, 3.0, 0.0]], np.float32)
    check(unit, fmt, fmt, a, b, c)


@pytest.mark.parametrize("unit,fmt", UNITS_FORMATS)
def test_c_far_above_and_below_the_products(unit, fmt, rng):
    L = UNITS[unit].k
    a, b = _finite(fmt, rng, (3, 2 * L), limit=6), _finite(fmt, rng, (2 * L, 4), limit=6)
    c = np.array([[2.0 ** 100, -(2.0 ** 60), 2.0 ** -126, -(2.0 ** -149)],
                  [1.5, 2.0 ** 20, -(2.0 ** 13), 2.0 ** -30],
                  [0.0, -0.0, 2.0 ** 126, 7.0]], np.float32)
    if UNITS[unit].c_format == "fp16":
        c = c.astype(np.float16).astype(np.float32)
    check(unit, fmt, fmt, a, b, c)


def test_cdna3_float_rounding_equals_the_integer_roundings(rng):
    """_rd_then_rne32 (float64 floor, then float32's conversion) against the two integer
    roundings it replaced (round_scaled 'rd' to 31 bits, 'rne' to 23, to_f32): signs, ties
    at both steps, subnormal and overflowing results, zero."""
    from fmtsim.mma.arith import round_scaled, to_f32
    from fmtsim.mma.step import _rd_then_rne32

    n = 20000
    mag = rng.integers(0, 1 << 40, n) >> rng.integers(0, 40, n)
    mag[:200] = (rng.integers(1, 1 << 24, 200) << 9) | (1 << 8)  # halfway at the second rounding
    mag[200:400] = (rng.integers(1, 1 << 30, 200) << 8) | rng.integers(1, 255, 200)  # bits below 2^-31
    total = np.where(rng.random(n) < 0.5, -mag, mag).astype(np.int64)
    total[400:410] = 0
    x = rng.integers(-200, 100, n).astype(np.int64)
    neg = total < 0
    q, e = round_scaled(neg, np.abs(total), x, 31, -126, "rd")
    q, e = round_scaled(neg, q, e, 23, -126, "rne")
    with np.errstate(over="ignore"):
        want = to_f32(neg, q, e)
    assert np.array_equal(bits(_rd_then_rne32(total, x, 31)), bits(want))


@pytest.mark.parametrize("f", slow_unless([24, 25, 28, 29, 30, 31, 32, 40], keep={25, 32}))
def test_terms_past_int32_fall_back_to_float64(f, rng):
    """F beyond what int32 terms hold (the probe grid goes to F = 40): the float64 path,
    equal to the Fraction twin; sum 32 of 32 ones was -0.0625 when int32 terms overflowed."""
    from dataclasses import replace

    unit = replace(UNITS["sm100_f8f6f4"], name=f"f{f}", fraction_bits=f)
    ones = np.full((1, 32), 0x38)  # E4M3 1.0
    check(unit, "e4m3", "e4m3", ones, ones.T.copy(), None)
    a, b = _finite("e4m3", rng, (8, 64)), _finite("e4m3", rng, (64, 8))
    check(unit, "e4m3", "e4m3", a, b, rng.standard_normal((8, 8)).astype(np.float32))
