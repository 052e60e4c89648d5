"""The matrix units beyond the first ten (every further instruction MMA-Sim 2.1.1 models):
fp16 outputs, fp16 C, tf32 inputs, CDNA1's exact steps, CDNA2's flush-to-zero adds and
RTX Blackwell's own units. The fast path against its Fraction twin (fixed cases and
hypothesis), worked examples derived by hand, and the records against the published
parameters (the records against MMA-Sim's own constants: tests/test_mma_peers.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fmtsim.mma import UNITS, matmul, slow_matmul
from fmtsim.mma.arith import operand_table

from .conftest import examples, slow_unless

# (L, F, output, e_zero) as MMA-Sim 2.1.1 nv_ptx/sim.py states them (_mma_F_bits, _mma_L_max_bytes,
# _mma_e_zero_for_fp16/_fp32) and as the issue lists them (Volta F=23 4 products -131, Turing /
# Ampere / Ada F=24 8 products -132, Hopper mma.sync F=25 16 products -133; fp16 -19/-20/-21)
PUBLISHED = {
    "sm70_mma_fp16": (4, 23, "rz_fp32", -131),
    "sm70_mma_fp16_f16": (4, 23, "rne_fp16", -19),
    "sm75_mma_fp16": (8, 24, "rz_fp32", -132),
    "sm75_mma_fp16_f16": (8, 24, "rne_fp16", -20),
    "sm80_mma_fp16": (8, 24, "rz_fp32", -132),
    "sm80_mma_fp16_f16": (8, 24, "rne_fp16", -20),
    "sm89_mma_fp8_f16": (16, 13, "rne_fp16", -20),
    "sm90_mma_fp16": (16, 25, "rz_fp32", -133),
    "sm90_mma_fp16_f16": (16, 25, "rne_fp16", -21),
    "sm90_wgmma_fp8_f16": (32, 13, "rne_fp16", -21),
    "sm120_f8f6f4": (32, 25, "rz_fp32", -133),
    "sm120_mxf8f6f4": (32, 25, "rz_fp32", -133),
    "sm120_mxf4": (64, 35, "rz_fp32", -139),
    "sm120_mxf4nvf4": (64, 35, "rz_fp32", -139),
}


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def test_published_parameters():
    for name, (L, F, out, ez) in PUBLISHED.items():
        u = UNITS[name]
        assert (u.k, u.fraction_bits, u.output, u.e_zero) == (L, F, out, ez), name
        assert u.source and u.title and u.peer, name
    for name, u in UNITS.items():
        assert (u.c_format == "fp16") == (u.output == "rne_fp16" or name == "sm70_mma_fp16_c16"), name
    assert [UNITS[n].k for n in ("cdna1_mfma_fp16", "cdna1_mfma_bf16", "cdna2_mfma_fp16", "cdna2_mfma_bf16")] == \
        [4, 2, 4, 2]
    assert UNITS["cdna3_mfma_xf32"].tf32_inputs and UNITS["cdna3_mfma_xf32"].k == 4
    assert UNITS["sm120_mxf4nvf4"].group == 16


def _case(rng, unit, fa, fb, m, n, k, specials):
    ta, tb = operand_table(fa), operand_table(fb)
    if specials:
        a = rng.integers(0, ta.n_codes, (m, k))
        b = rng.integers(0, tb.n_codes, (k, n))
    else:
        a = rng.choice(np.nonzero(ta.cls == 0)[0], (m, k))
        b = rng.choice(np.nonzero(tb.cls == 0)[0], (k, n))
    c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-20, 20, (m, n))).astype(np.float32)
    c[rng.random((m, n)) < 0.3] = 0
    if UNITS[unit].c_format == "fp16":
        c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-20, 12, (m, n))).astype(np.float16).astype(np.float32)
        c[rng.random((m, n)) < 0.3] = 0
    return a, b, c


def _scales(rng, sf, shape_a, shape_b):
    if sf == "e8m0":
        return rng.integers(100, 150, shape_a), rng.integers(100, 150, shape_b)
    return rng.integers(0, 256, shape_a), rng.integers(0, 256, shape_b)


NEW = [u for u in UNITS.values() if u.family != "fma" and u.name not in (  # fma units: tests/test_mma_fma.py
    "exact", "sm89_mma_fp8", "sm90_wgmma_fp8", "sm90_wgmma_fp16", "sm100_f8f6f4", "sm100_mxf8f6f4", "sm100_mxf4",
    "sm100_mxf4nvf4", "cdna3_mfma_fp8", "cdna3_mfma_fp16")]
CASES = []
for _u in NEW:
    _fmts = list(_u.formats)
    # fp16/bf16/tf32 instructions take one type for both; f8f6f4 any pair: the two extremes
    _pairs = ([(_fmts[0], _fmts[-1]), (_fmts[-1], _fmts[0])] if len(_fmts) > 2 else [(f, f) for f in _fmts])
    for _fa, _fb in _pairs:
        _sf = _u.scale_formats[-1] if _u.scaled else None
        _bs = _u.block_sizes[0] if _u.scaled else None
        CASES.append((_u.name, _fa, _fb, _sf, _bs))
KEEP = {c for c in CASES if c[0] in ("sm80_mma_fp16_f16", "sm80_mma_tf32", "cdna2_mfma_fp16", "cdna1_mfma_bf16",
                                     "sm120_mxf4nvf4", "sm70_mma_fp16_c16")}


@pytest.mark.parametrize("unit,fa,fb,sf,bs", slow_unless(CASES, keep=KEEP))
def test_fast_equals_slow_twin(unit, fa, fb, sf, bs, rng):
    u = UNITS[unit]
    k = u.k * 2
    for specials in (False, True):
        a, b, c = _case(rng, unit, fa, fb, 3, 4, k, specials)
        sa = sb = None
        if sf:
            sa, sb = _scales(rng, sf, (3, k // bs), (k // bs, 4))
        kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
        assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(slow_matmul(a, b, c, **kw))), (unit, specials)


@settings(max_examples=examples(120), deadline=None)
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 3),
       m=st.integers(1, 3), n=st.integers(1, 3), promote=st.booleans(), tf32_as_fp32=st.booleans())
def test_hypothesis_fast_equals_slow(case, seed, steps, m, n, promote, tf32_as_fp32):
    unit, fa, fb, sf, bs = case
    u = UNITS[unit]
    rng = np.random.default_rng(seed)
    a, b, c = _case(rng, unit, fa, fb, m, n, u.k * steps, specials=bool(seed % 2))
    sa = sb = None
    if sf:
        sa, sb = _scales(rng, sf, (m, u.k * steps // bs), (u.k * steps // bs, n))
    if fa == "tf32" and tf32_as_fp32:  # fp32 patterns: the unit drops the 13 low bits itself
        a, fa = (a << 13) | rng.integers(0, 1 << 13, a.shape), "fp32"
        b, fb = (b << 13) | rng.integers(0, 1 << 13, b.shape), "fp32"
    kw = dict(unit=unit, a_format=fa, b_format=fb, a_scales=sa, b_scales=sb, scale_format=sf, block_size=bs)
    if promote:
        kw["promote_every"] = u.k
    assert np.array_equal(bits(matmul(a, b, c, **kw)), bits(slow_matmul(a, b, c, **kw)))


# ---- worked examples, derived by hand ---------------------------------------------------

F16_ONE = 0x3C00


def _f16(x):
    return int(np.array(x, np.float16).view(np.uint16))


def test_fp16_output_rounds_to_nearest_even():
    """C = 1 (fp16) plus products: 2^-11 alone is a tie and stays at 1 (even); 2^-11 + 2^-12
    is above the tie and rounds up to 1 + 2^-10, which RZ to fp32 would not give in fp16."""
    a = np.zeros((2, 8), np.int64)
    b = np.full((8, 1), F16_ONE)
    a[0, 0] = _f16(2.0**-11)
    a[1, 0], a[1, 1] = _f16(2.0**-11), _f16(2.0**-12)
    c = np.ones((2, 1), np.float32)
    got = matmul(a, b, c, unit="sm80_mma_fp16_f16", a_format="fp16", b_format="fp16")
    assert got[0, 0] == 1.0 and got[1, 0] == np.float32(1 + 2.0**-10)
    rz = matmul(a, b, c, unit="sm80_mma_fp16", a_format="fp16", b_format="fp16")
    assert rz[1, 0] == np.float32(1 + 2.0**-11 + 2.0**-12)  # fp32 keeps it all


def test_fp16_output_overflows_to_inf():
    """65504 + 16 = 65520 is the tie above fp16's largest value: RNE to even is 2^16, Inf;
    65504 + 8 rounds back to 65504."""
    a = np.zeros((2, 8), np.int64)
    b = np.full((8, 1), F16_ONE)
    a[0, 0], a[0, 1] = _f16(65504.0), _f16(16.0)
    a[1, 0], a[1, 1] = _f16(65504.0), _f16(8.0)
    got = matmul(a, b, unit="sm90_mma_fp16_f16_k8", a_format="fp16", b_format="fp16")
    assert np.isposinf(got[0, 0]) and got[1, 0] == 65504.0


def test_fp16_c_exponent_clamps_at_fp16s_smallest_normal():
    """Volta m8n8k4 with an fp16 C: C = 2^-24 (fp16's smallest subnormal) joins with exponent
    -14, so 2^(-14 - 23) = 2^-37 is the cut and the product 2^-19 * 2^-19 = 2^-38 (alignment
    exponent -28: subnormal factors keep -14) vanishes. With an fp32 C the same value has
    exponent -24, the largest of the terms, and 2^-38 survives the cut at 2^-47."""
    a = np.zeros((1, 4), np.int64)
    b = np.zeros((4, 1), np.int64)
    a[0, 0], b[0, 0] = _f16(2.0**-19), _f16(2.0**-19)
    a[0, 1], b[1, 0] = F16_ONE, 0  # a zero product: e_zero -131 is below both, no effect
    c = np.full((1, 1), 2.0**-24, np.float32)
    c16 = matmul(a, b, c, unit="sm70_mma_fp16_c16", a_format="fp16", b_format="fp16")
    c32 = matmul(a, b, c, unit="sm70_mma_fp16", a_format="fp16", b_format="fp16")
    assert c16[0, 0] == np.float32(2.0**-24)
    assert c32[0, 0] == np.float32(2.0**-24 + 2.0**-38)
    with pytest.raises(ValueError, match="not an fp16 value"):
        matmul(a, b, np.full((1, 1), 0.1, np.float32), unit="sm70_mma_fp16_c16", a_format="fp16", b_format="fp16")


def test_tf32_drops_the_13_low_bits_of_fp32():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    xa, wb = x.view(np.uint32).astype(np.int64), w.view(np.uint32).astype(np.int64)
    got = matmul(xa, wb, unit="sm80_mma_tf32", a_format="fp32", b_format="fp32")
    codes = matmul(xa >> 13, wb >> 13, unit="sm80_mma_tf32", a_format="tf32", b_format="tf32")
    assert np.array_equal(bits(got), bits(codes))
    # the tf32 values are the fp32 values with their low 13 bits cleared
    t = operand_table("tf32")
    cleared = (x.view(np.uint32) & ~np.uint32(0x1FFF)).view(np.float32)
    assert np.array_equal(t.values[xa >> 13].astype(np.float32), cleared)
    with pytest.raises(ValueError, match="does not take a_format=fp32"):
        matmul(xa, wb, unit="sm80_mma_fp16", a_format="fp32", b_format="fp32")


def test_cdna1_rounds_once_per_step_of_four():
    """CDNA1 fp16: each 4 products and C exact, one RNE per step. C = 2^24, then a step with
    +1 (kept exactly only until the rounding: 2^24 + 1 is a tie, even is 2^24) and a second
    step with +1 again: 2^24 each time, where one exact rounding over K = 8 gives 2^24 + 2."""
    a = np.zeros((1, 8), np.int64)
    b = np.full((8, 1), F16_ONE)
    a[0, 0] = a[0, 4] = F16_ONE
    c = np.full((1, 1), 2.0**24, np.float32)
    step = matmul(a, b, c, unit="cdna1_mfma_fp16", a_format="fp16", b_format="fp16")
    once = matmul(a, b, c, unit="exact", a_format="fp16", b_format="fp16")
    assert step[0, 0] == np.float32(2.0**24) and once[0, 0] == np.float32(2.0**24 + 2)


def test_cdna2_flushes_subnormals():
    """CDNA2 fp16: a subnormal fp16 input counts as 0; bf16: a product below 2^-126 is
    flushed (2^-64 * 2^-63 = 2^-127), where CDNA1 keeps it."""
    a = np.zeros((1, 4), np.int64)
    b = np.full((4, 1), F16_ONE)
    a[0, 0] = 0x0001  # 2^-24
    got = matmul(a, b, unit="cdna2_mfma_fp16", a_format="fp16", b_format="fp16")
    assert got[0, 0] == 0
    import ml_dtypes
    bf = lambda v: int(np.array(v, ml_dtypes.bfloat16).view(np.uint16))  # noqa: E731
    a2 = np.zeros((1, 2), np.int64)
    b2 = np.zeros((2, 1), np.int64)
    a2[0, 0], b2[0, 0] = bf(2.0**-64), bf(2.0**-63)
    assert matmul(a2, b2, unit="cdna2_mfma_bf16", a_format="bf16", b_format="bf16")[0, 0] == 0
    assert matmul(a2, b2, unit="cdna1_mfma_bf16", a_format="bf16", b_format="bf16")[0, 0] == np.float32(2.0**-127)
