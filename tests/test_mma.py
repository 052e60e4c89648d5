"""fmtsim.mma: unit records against the published parameters, the fast step against its
Fraction twin (fixed and hypothesis cases), worked examples derived by hand, the exact
unit against an independent Fraction sum, MX / NVFP4 tensor operands, chaining options
and error messages."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fmtsim
from fmtsim.mma import UNITS, get_unit, matmul, slow_matmul
from fmtsim.mma.arith import operand_table

DESIGN_UNITS = ["exact", "sm89_mma_fp8", "sm90_wgmma_fp8", "sm90_wgmma_fp16", "sm100_f8f6f4", "sm100_mxf8f6f4",
                "sm100_mxf4", "sm100_mxf4nvf4", "cdna3_mfma_fp8", "cdna3_mfma_fp16"]

# (L, F, output, e_zero) as published (Khattak-Mikaitis table; MMA-Sim's sim.py constants)
PUBLISHED = {
    "sm90_wgmma_fp16": (16, 25, "rz_fp32", -133),
    "sm90_wgmma_fp8": (32, 13, "rz_e8m13", -133),
    "sm89_mma_fp8": (16, 13, "rz_e8m13", -132),
    "sm100_f8f6f4": (32, 25, "rz_fp32", -133),
    "sm100_mxf8f6f4": (32, 25, "rz_fp32", -133),
    "sm100_mxf4": (64, 35, "rz_fp32", -139),
    "sm100_mxf4nvf4": (64, 35, "rz_fp32", -139),
}


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_design_units_exist_and_cite_sources():
    assert set(DESIGN_UNITS) <= set(UNITS)
    for u in UNITS.values():
        assert u.source and u.title, u.name
        if u.name != "exact":
            assert u.peer, u.name
    for name, (L, F, out, ez) in PUBLISHED.items():
        u = UNITS[name]
        assert (u.k, u.fraction_bits, u.output, u.e_zero) == (L, F, out, ez), name
    assert UNITS["sm100_mxf4nvf4"].group == 16 and UNITS["sm100_mxf4"].group == 16
    amd8, amd16 = UNITS["cdna3_mfma_fp8"], UNITS["cdna3_mfma_fp16"]
    assert (amd8.k, amd8.fraction_bits, amd8.even_odd, amd8.drop_small_c) == (16, 24, True, True)
    assert (amd16.k, amd16.fraction_bits, amd16.even_odd) == (8, 24, False)
    with pytest.raises(ValueError, match="known units: exact"):
        get_unit("sm70_hmma")


# ---- worked examples, derived by hand from the models ----------------------------------

E4M3_ONE, E4M3_2M7 = 0x38, 0x04  # 1.0 and 2^-7 (a subnormal: exponent -6, significand 4/8)


def test_hopper_fp8_drops_what_blackwell_keeps():
    """1*1 + 2^-7 * 2^-7 = 1 + 2^-14. Hopper keeps 13 bits below the largest exponent (0):
    the 2^-14 term is gone. Blackwell keeps 25: it stays. The exact unit keeps it too."""
    a = np.array([[E4M3_ONE, E4M3_2M7] + [0] * 30])
    b = np.array([[E4M3_ONE], [E4M3_2M7]] + [[0]] * 30)
    kw = dict(a_format="e4m3", b_format="e4m3")
    assert matmul(a, b, unit="sm90_wgmma_fp8", **kw)[0, 0] == 1.0
    assert matmul(a, b, unit="sm100_f8f6f4", **kw)[0, 0] == 1 + 2.0**-14
    assert matmul(a, b, unit="exact", **kw)[0, 0] == 1 + 2.0**-14


def test_truncation_is_toward_zero_and_output_rz():
    """C = 1 and one product -2^-32 (e5m2 -2^-16 * 2^-16): Blackwell truncates it toward zero
    at 2^-25 (to 0) and gives exactly 1.0 (truncating toward -Inf would give 1 - 2^-25, and
    RZ of the exact 1 - 2^-32 would give 1 - 2^-24). A product -2^-20 is kept: 1 - 2^-20."""
    a = np.array([[0x81] + [0] * 31])  # e5m2 -2^-16
    b = np.array([[0x01]] + [[0]] * 31)  # e5m2 2^-16
    c = np.array([[1.0]], np.float32)
    assert matmul(a, b, c, unit="sm100_f8f6f4", a_format="e5m2", b_format="e5m2")[0, 0] == 1.0
    a2 = np.array([[0x80 | 0x14] + [0] * 31])  # e5m2 -2^(5-15) = -2^-10
    b2 = np.array([[0x14]] + [[0]] * 31)
    got = matmul(a2, b2, c, unit="sm100_f8f6f4", a_format="e5m2", b_format="e5m2")[0, 0]
    assert got == np.float32(1 - 2.0**-20)
    # Hopper: 1 - 2^-20 aligned at 2^0 with 13 bits: the product is truncated toward zero to 0
    got = matmul(a2, b2, c, unit="sm90_wgmma_fp8", a_format="e5m2", b_format="e5m2")[0, 0]
    assert got == 1.0


def test_hopper_output_is_e8m13_truncated():
    """C = 1 + 2^-13 + 2^-20 (an fp32) plus a zero product: e_max is C's exponent 0,
    C keeps 13 fraction bits (2^-20 truncated), the result is 1 + 2^-13."""
    c = np.array([[1 + 2.0**-13 + 2.0**-20]], np.float32)
    a = np.zeros((1, 32), np.uint8)
    b = np.zeros((32, 1), np.uint8)
    assert matmul(a, b, c, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")[0, 0] == 1 + 2.0**-13
    assert matmul(a, b, c, unit="sm100_f8f6f4", a_format="e4m3", b_format="e4m3")[0, 0] == c[0, 0]


def test_e_zero_sets_the_lowest_alignment_point():
    """mxf8f6f4 with both scales 2^-127: the products 1*1*2^-254 have exponent -254; C = 0
    is a zero term with e_zero = -133, so everything below 2^(-133-25) is cut: D = 0."""
    a = np.array([[E4M3_ONE] * 32])
    b = np.array([[E4M3_ONE]] * 32)
    s0 = np.zeros((1, 1), np.uint8)
    kw = dict(a_format="e4m3", b_format="e4m3", scale_format="e8m0", block_size=32)
    assert matmul(a, b, unit="sm100_mxf8f6f4", a_scales=s0, b_scales=s0, **kw)[0, 0] == 0.0
    # the exact unit keeps 32 * 2^-254, which is below fp32's smallest subnormal: RNE gives 0 too,
    # but with scales 2^-60 each: 32 * 2^-120 is a normal fp32
    s60 = np.full((1, 1), 127 - 60, np.uint8)
    assert matmul(a, b, unit="sm100_mxf8f6f4", a_scales=s60, b_scales=s60, **kw)[0, 0] == 32 * 2.0**-120
    assert matmul(a, b, unit="exact", a_scales=s60, b_scales=s60, **kw)[0, 0] == 32 * 2.0**-120


def test_grouped_alignment_uses_the_scale_exponent():
    """mxf4: a group summing to 6*6*16 = 576 under scale 1 and a group of one product 0.5*0.5
    under scale 2^-40: the small group aligns at its scale exponent -40 (not its product's
    -42), so relative to 0 it keeps 35 bits: 2^-42 is cut (below 2^-35)."""
    a = np.zeros((1, 64), np.uint8)
    b = np.zeros((64, 1), np.uint8)
    a[0, :16] = 0x7  # 6.0
    b[:16, 0] = 0x7
    a[0, 32] = 0x1  # 0.5
    b[32, 0] = 0x1
    sa = np.array([[127, 127 - 20]], np.uint8)
    sb = np.array([[127], [127 - 20]], np.uint8)
    got = matmul(a, b, unit="sm100_mxf4", a_format="e2m1", b_format="e2m1", a_scales=sa, b_scales=sb,
                 scale_format="e8m0", block_size=32)
    assert got[0, 0] == 576.0
    ex = matmul(a, b, unit="exact", a_format="e2m1", b_format="e2m1", a_scales=sa, b_scales=sb,
                scale_format="e8m0", block_size=32)
    assert ex[0, 0] == np.float32(576 + 2.0**-42)


def test_amd_fp8_rounds_down_then_nearest():
    """CDNA3 FP8: C = 1 and one product -2^-30 (e5m2fnuz 2^-15 * 2^-15): products align on
    their own (no truncation of a lone term), join C rounding DOWN at 2^-32 (exact), the
    sum 1 - 2^-30 rounds down to 32 bits (exact) then to nearest fp32: 1.0."""
    a = np.zeros((1, 16), np.uint8)
    b = np.zeros((16, 1), np.uint8)
    a[0, 0] = 0x80 | 0x04  # e5m2fnuz: 0x04 = 2^(1-16) = 2^-15; FNUZ has no -0, 0x84 is -2^-15
    b[0, 0] = 0x04
    c = np.array([[1.0]], np.float32)
    assert operand_table("e5m2fnuz").values[0x84] == -(2.0**-15)
    assert matmul(a, b, c, unit="cdna3_mfma_fp8", a_format="e5m2fnuz", b_format="e5m2fnuz")[0, 0] == 1.0
    # C below e_max - 25 is dropped: product 1 (e=0), C = 2^-30 -> 1.0 exactly
    a[0, 0], b[0, 0] = 0x40, 0x40  # 2^(8-16) each: product 2^-16 ... use 1.0 = 0x40 in e5m2fnuz (exp field 16)
    assert operand_table("e5m2fnuz").values[0x40] == 1.0
    c2 = np.array([[-(2.0**-30)]], np.float32)
    # kept, C would floor to -2^-24 and 1 - 2^-24 rounds to nearest fp32 1 - 2^-24; dropped: 1.0
    assert matmul(a, b, c2, unit="cdna3_mfma_fp8", a_format="e5m2fnuz", b_format="e5m2fnuz")[0, 0] == 1.0


# ---- the exact unit against an independent Fraction sum ---------------------------------

@pytest.mark.parametrize("fa,fb", [("e4m3", "e5m2"), ("e5m2", "e5m2"), ("e2m1", "e3m2"), ("fp16", "bf16")])
def test_exact_unit_is_one_rounding_of_the_exact_sum(fa, fb, rng):
    ta, tb = operand_table(fa), operand_table(fb)
    fin_a, fin_b = np.nonzero(ta.cls == 0)[0], np.nonzero(tb.cls == 0)[0]
    a = rng.choice(fin_a, (3, 40))
    b = rng.choice(fin_b, (40, 4))
    c = rng.standard_normal((3, 4)).astype(np.float32)
    got = matmul(a, b, c, unit="exact", a_format=fa, b_format=fb)
    from fmtsim.mma.slow import fl32

    for i in range(3):
        for j in range(4):
            s = Fraction(float(c[i, j])) + sum(Fraction(float(ta.values[a[i, k]])) * Fraction(float(tb.values[b[k, j]]))
                                               for k in range(40))
            assert got[i, j] == fl32(s)


# ---- fast path == Fraction twin ------------------------------------------------------------

def _random_case(rng, unit, fa, fb, m, n, k, sf=None, bs=None, specials=True):
    ta, tb = operand_table(fa), operand_table(fb)
    if specials:
        a = rng.integers(0, ta.n_codes, (m, k))
        b = rng.integers(0, tb.n_codes, (k, n))
    else:
        a = rng.choice(np.nonzero(ta.cls == 0)[0], (m, k))
        b = rng.choice(np.nonzero(tb.cls == 0)[0], (k, n))
    c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-20, 20, (m, n))).astype(np.float32)
    c[rng.random((m, n)) < 0.3] = 0
    sa = sb = None
    if sf:
        hi = 256 if sf == "e8m0" else 256
        sa = rng.integers(100, 150, (m, k // bs)) if sf == "e8m0" else rng.integers(0, hi, (m, k // bs))
        sb = rng.integers(100, 150, (k // bs, n)) if sf == "e8m0" else rng.integers(0, hi, (k // bs, n))
        if specials and sf == "e8m0":
            sa[rng.random(sa.shape) < 0.1] = 0xFF
            sa[rng.random(sa.shape) < 0.1] = 0x00
    return a, b, c, sa, sb


CASES = [
    ("exact", "e4m3", "e2m1", None, None),
    ("exact", "e2m1", "e2m1", "ue4m3", 16),
    ("sm89_mma_fp8", "e5m2", "e4m3", None, None),
    ("sm90_wgmma_fp8", "e4m3", "e4m3", None, None),
    ("sm90_wgmma_fp8", "e5m2", "e5m2", None, None),
    ("sm90_wgmma_fp16", "fp16", "fp16", None, None),
    ("sm90_wgmma_fp16", "bf16", "bf16", None, None),
    ("sm100_f8f6f4", "e3m2", "e2m3", None, None),
    ("sm100_f8f6f4", "e2m1", "e5m2", None, None),
    ("sm100_mxf8f6f4", "e4m3", "e2m1", "e8m0", 32),
    ("sm100_mxf8f6f4", "e5m2", "e3m2", "e8m0", 32),
    ("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32),
    ("sm100_mxf4nvf4", "e2m1", "e2m1", "e8m0", 16),
    ("sm100_mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
    ("cdna3_mfma_fp8", "e4m3fnuz", "e5m2fnuz", None, None),
    ("cdna3_mfma_fp16", "fp16", "fp16", None, None),
    ("cdna3_mfma_fp16", "bf16", "bf16", None, None),
]


@pytest.mark.parametrize("unit,fa,fb,sf,bs", CASES)
@pytest.mark.parametrize("specials", [False, True])
def test_fast_equals_slow_twin(unit, fa, fb, sf, bs, specials, rng):
    u = UNITS[unit]
    k = (u.k or 32) * 2
    a, b, c, sa, sb = _random_case(rng, unit, fa, fb, 3, 4, k, sf, bs, specials)
    kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
    fast = matmul(a, b, c, **kw)
    slow = slow_matmul(a, b, c, **kw)
    assert np.array_equal(bits(fast), bits(slow)), (bits(fast), bits(slow))


@pytest.mark.parametrize("unit,fa,fb,sf,bs", [CASES[3], CASES[9], CASES[13], CASES[14]])
def test_chaining_options_equal_slow_twin(unit, fa, fb, sf, bs, rng):
    u = UNITS[unit]
    k = u.k * 4
    a, b, c, sa, sb = _random_case(rng, unit, fa, fb, 2, 3, k, sf, bs, specials=False)
    kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
    for extra in (dict(promote_every=2 * u.k), dict(split_k=2), dict(split_k=[u.k]),
                  dict(split_k=[u.k, 3 * u.k], promote_every=u.k)):
        fast = matmul(a, b, c, **kw, **extra)
        slow = slow_matmul(a, b, c, **kw, **extra)
        assert np.array_equal(bits(fast), bits(slow)), extra
    # one slice and no promotion is the plain chain; promotion changes Hopper's answer somewhere
    assert np.array_equal(bits(matmul(a, b, c, **kw, split_k=1)), bits(matmul(a, b, c, **kw)))


def test_promotion_interval_matters_on_hopper(rng):
    a, b, c, _, _ = _random_case(rng, "sm90_wgmma_fp8", "e4m3", "e4m3", 16, 16, 512, specials=False)
    kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    plain = matmul(a, b, c, **kw)
    promoted = matmul(a, b, c, **kw, promote_every=128)
    exact = matmul(a, b, c, unit="exact", a_format="e4m3", b_format="e4m3")
    assert not np.array_equal(bits(plain), bits(promoted))
    # promotion brings the result closer to the exact answer on average
    assert np.abs(promoted - exact).mean() < np.abs(plain - exact).mean()


FMT_PAIRS = st.sampled_from([c for c in CASES if c[0] != "exact"])


@settings(max_examples=60, deadline=None)
@given(case=FMT_PAIRS, seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 3), m=st.integers(1, 3),
       n=st.integers(1, 3), promote=st.booleans())
def test_hypothesis_fast_equals_slow(case, seed, steps, m, n, promote):
    unit, fa, fb, sf, bs = case
    u = UNITS[unit]
    rng = np.random.default_rng(seed)
    a, b, c, sa, sb = _random_case(rng, unit, fa, fb, m, n, u.k * steps, sf, bs, specials=bool(seed % 2))
    kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
    if promote:
        kw["promote_every"] = u.k
    assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(slow_matmul(a, b, c, **kw)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 70))
def test_hypothesis_padding_k_with_zeros(seed, k):
    """K not a multiple of the unit's K is padded with zero codes: the same as padding by hand."""
    rng = np.random.default_rng(seed)
    a, b, c, _, _ = _random_case(rng, "sm90_wgmma_fp8", "e4m3", "e5m2", 2, 2, k, specials=False)
    kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e5m2")
    kp = -(-k // 32) * 32
    ap = np.concatenate([a, np.zeros((2, kp - k), a.dtype)], 1)
    bp = np.concatenate([b, np.zeros((kp - k, 2), b.dtype)], 0)
    assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(matmul(ap, bp, c, **kw)))
    assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(slow_matmul(ap, bp, c, **kw)))


# ---- MX / NVFP4 tensor operands ------------------------------------------------------------

def test_mx_tensor_operands(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    w = rng.standard_normal((5, 64)).astype(np.float32)  # (N, K): quantized along K
    qa = fmtsim.mx.quantize(x, "mxfp4")
    qb = fmtsim.mx.quantize(w, "mxfp4")
    got = matmul(qa, qb, unit="sm100_mxf4")
    want = matmul(qa.codes, qb.codes.T, unit="sm100_mxf4", a_format="e2m1", b_format="e2m1", a_scales=qa.scales,
                  b_scales=qb.scales.T, scale_format="e8m0", block_size=32)
    assert np.array_equal(bits(got), bits(want))
    # the exact unit on MX operands is the dequantized product summed exactly, rounded once
    ex = matmul(qa, qb, unit="exact")
    da = fmtsim.mx.dequantize(qa, np.float64)
    db = fmtsim.mx.dequantize(qb, np.float64)
    from fmtsim.mma.slow import fl32
    for i in range(4):
        for j in range(5):
            s = sum(Fraction(float(da[i, k])) * Fraction(float(db[j, k])) for k in range(64))
            assert ex[i, j] == fl32(s)
    # b given as (K, N) blocks along axis 0 reads the same
    qb0 = fmtsim.mx.quantize(w.T.copy(), "mxfp4", axis=0)
    assert np.array_equal(bits(matmul(qa, qb0, unit="sm100_mxf4")), bits(got))


def test_nvfp4_tensor_operands(rng):
    x = rng.standard_normal((3, 32)).astype(np.float32)
    w = rng.standard_normal((2, 32)).astype(np.float32)
    qa, qb = fmtsim.nvfp4.quantize(x), fmtsim.nvfp4.quantize(w)
    got = matmul(qa, qb, unit="sm100_mxf4nvf4")
    acc = matmul(qa.codes, qb.codes.T, unit="sm100_mxf4nvf4", a_format="e2m1", b_format="e2m1", a_scales=qa.scales,
                 b_scales=qb.scales.T, scale_format="ue4m3", block_size=16)
    alpha = np.float32(float(qa.global_scale) * float(qb.global_scale))
    assert np.array_equal(bits(got), bits((alpha * acc).astype(np.float32)))
    # close to the float product of the dequantized tensors
    ref = fmtsim.nvfp4.dequantize(qa, np.float64) @ fmtsim.nvfp4.dequantize(qb, np.float64).T
    assert np.allclose(got, ref, rtol=1e-5, atol=1e-6)


# ---- errors ------------------------------------------------------------------------------

def test_errors_name_the_problem():
    a = np.zeros((2, 32), np.uint8)
    b = np.zeros((32, 3), np.uint8)
    with pytest.raises(ValueError, match="does not take a_format=e2m1"):
        matmul(a, b, unit="sm90_wgmma_fp8", a_format="e2m1", b_format="e4m3")
    with pytest.raises(ValueError, match="a's columns must equal b's rows"):
        matmul(a, b[:16], unit="exact", a_format="e4m3", b_format="e4m3")
    with pytest.raises(ValueError, match=r"a\[0, 1\] = 16 is not a e2m1 code"):
        a2 = a.copy()
        a2[0, 1] = 16
        matmul(a2, b, unit="sm100_f8f6f4", a_format="e2m1", b_format="e4m3")
    with pytest.raises(ValueError, match="block-scaled: give a_scales"):
        matmul(a, b, unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e4m3")
    with pytest.raises(ValueError, match="takes no block scales"):
        matmul(a, b, unit="sm100_f8f6f4", a_format="e4m3", b_format="e4m3", a_scales=np.zeros((2, 1), np.uint8),
               b_scales=np.zeros((1, 3), np.uint8), scale_format="e8m0", block_size=32)
    with pytest.raises(ValueError, match="a_scales must be"):
        matmul(a, b, unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e4m3", a_scales=np.zeros((2, 2), np.uint8),
               b_scales=np.zeros((1, 3), np.uint8), scale_format="e8m0", block_size=32)
    with pytest.raises(ValueError, match="promote_every must be a positive multiple"):
        matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", promote_every=48)
    with pytest.raises(ValueError, match="split_k boundary 16"):
        matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", split_k=[16])
    with pytest.raises(TypeError, match="integer codes"):
        matmul(a.astype(np.float32), b, unit="exact", a_format="e4m3", b_format="e4m3")
    with pytest.raises(ValueError, match="not an fp32 value"):
        matmul(a, b, np.full((2, 3), 0.1), unit="exact", a_format="e4m3", b_format="e4m3")


def test_nan_results_are_canonical():
    a = np.zeros((1, 32), np.uint8)
    b = np.zeros((32, 1), np.uint8)
    a[0, 0] = 0x7F  # e4m3 NaN
    out = matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    assert bits(out)[0, 0] == 0x7FFFFFFF
    s = np.array([[0xFF]], np.uint8)  # E8M0 NaN scale: NaN even though every element is 0
    out = matmul(a * 0, b, unit="sm100_mxf8f6f4", a_format="e4m3", b_format="e4m3", a_scales=s,
                 b_scales=np.array([[127]], np.uint8), scale_format="e8m0", block_size=32)
    assert bits(out)[0, 0] == 0x7FFFFFFF


def test_ue4m3_bit7_is_ignored(rng):
    """mxf4nvf4 reads a UE4M3 scale byte's low 7 bits (MMA-Sim's truncate_e4m3_to_ue4m3)."""
    a = rng.integers(0, 16, (2, 64))
    b = rng.integers(0, 16, (64, 3))
    sa = rng.integers(0x20, 0x50, (2, 4))
    sb = rng.integers(0x20, 0x50, (4, 3))
    kw = dict(unit="sm100_mxf4nvf4", a_format="e2m1", b_format="e2m1", scale_format="ue4m3", block_size=16)
    plain = matmul(a, b, a_scales=sa, b_scales=sb, **kw)
    high = matmul(a, b, a_scales=sa | 0x80, b_scales=sb | 0x80, **kw)
    assert np.array_equal(bits(plain), bits(high))


@settings(max_examples=30, deadline=None)
@given(case=FMT_PAIRS, seed=st.integers(0, 2**32 - 1), steps=st.integers(2, 4),
       cut=st.integers(1, 3), promote=st.booleans())
def test_hypothesis_split_k_equals_slow(case, seed, steps, cut, promote):
    unit, fa, fb, sf, bs = case
    u = UNITS[unit]
    rng = np.random.default_rng(seed)
    a, b, c, sa, sb = _random_case(rng, unit, fa, fb, 2, 2, u.k * steps, sf, bs, specials=False)
    kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs,
              split_k=[u.k * min(cut, steps - 1)])
    if promote:
        kw["promote_every"] = u.k
    assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(slow_matmul(a, b, c, **kw)))
