"""The compiled engine (fmtsim.mma.compiled, nv_chain.cpp) against the numpy step, bit for
bit, and both against the Fraction twin (fmtsim.mma.slow) on small cases: every unit it
covers (the nv family, the block-scaled FP4 units, CDNA3 FP8) and every operand format it
takes, wide exponent ranges, zeros, block scales, split_k and promote_every, NaN / Inf
operands, non-finite C and overflow (the outputs the C++ code leaves to the numpy step),
subnormal results, and tiles over processes."""

import numpy as np
import pytest

from fmtsim.mma import UNITS, compiled, matmul, slow_matmul
from fmtsim.mma.arith import operand_table

from .conftest import slow_unless

why = compiled.unavailable_reason()
pytestmark = pytest.mark.skipif(why is not None, reason=f"the compiled engine is unavailable: {why}")

COVERED = [n for n, u in UNITS.items() if compiled.covers(u)]
# the code-table units (the fma family's fp32/fp64 operands have tests of their own below)
UNIT_FORMATS = [(n, f) for n in COVERED for f in UNITS[n].formats if UNITS[n].family != "fma"]


def test_covered_units():
    """Every nv, nv_grouped and fma unit and CDNA3's FP8 ones; the rest (fp16/bf16 CDNA3 with their
    product-overflow rule, the exact and ftz families) stay with numpy."""
    assert set(COVERED) == {n for n, u in UNITS.items() if u.family in ("nv", "nv_grouped", "fma")} | \
        {"cdna3_mfma_fp8"}


def bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def finite(fmt, rng, shape, zeros=0.1):
    """Finite codes of fmt (a share of them zero), drawn over every exponent."""
    t = operand_table(fmt)
    ok = np.nonzero((t.cls == 0) & (t.sig != 0))[0]
    zero = np.nonzero((t.cls == 0) & (t.sig == 0))[0]
    out = rng.choice(ok, shape)
    return np.where(rng.random(shape) < zeros, rng.choice(zero, shape), out)


def c_values(unit, rng, shape):
    c = (rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 30, shape)).astype(np.float32)
    c.flat[::7] = 0
    if UNITS[unit].c_format == "fp16":
        c = np.clip(c, -60000, 60000).astype(np.float16).astype(np.float32)
    return c


def engines(a, b, c, **kw):
    fast = bits(matmul(a, b, c, engine="compiled", **kw))
    ref = bits(matmul(a, b, c, engine="numpy", **kw))
    assert np.array_equal(fast, ref), (np.argwhere(fast != ref)[:3], fast[fast != ref][:3], ref[fast != ref][:3])
    return fast


def scaled(unit):
    return UNITS[unit].scaled


def scale_kw(unit, rng, m, n, k):
    u = UNITS[unit]
    sf, bs = u.scale_formats[0], u.block_sizes[0]
    lo, hi = (120, 134) if sf == "e8m0" else (0x30, 0x40)
    return dict(a_scales=rng.integers(lo, hi, (m, k // bs)), b_scales=rng.integers(lo, hi, (k // bs, n)),
                scale_format=sf, block_size=bs)


@pytest.mark.parametrize("unit,fmt", slow_unless(UNIT_FORMATS, keep={("sm90_wgmma_fp8", "e4m3"),
                                                                    ("sm100_mxf8f6f4", "e2m1"),
                                                                    ("sm90_mma_fp16_f16", "fp16"),
                                                                    ("cdna3_mfma_fp8", "e5m2fnuz")}))
def test_compiled_equals_numpy_on_every_covered_unit_and_format(unit, fmt, rng):
    u = UNITS[unit]
    m, n, k = 9, 11, 6 * u.k
    a, b = finite(fmt, rng, (m, k)), finite(fmt, rng, (k, n))
    a[2] = 0  # a zero row: every product zero (e_zero sets the alignment)
    b[: u.k, 3] = 0
    kw = dict(unit=unit, a_format=fmt, b_format=fmt)
    if scaled(unit):
        kw.update(scale_kw(unit, rng, m, n, k))
    engines(a, b, c_values(unit, rng, (m, n)), **kw)
    engines(a, b, None, promote_every=2 * u.k, **kw)
    engines(a, b, c_values(unit, rng, (m, n)), split_k=[4 * u.k], **kw)


@pytest.mark.parametrize("unit,fmt", [("sm90_wgmma_fp8", "e4m3"), ("sm89_mma_fp8_f16", "e5m2"),
                                      ("sm100_mxf8f6f4", "e4m3"), ("sm90_mma_tf32", "tf32"),
                                      ("cdna3_mfma_fp8", "e4m3fnuz")])
def test_compiled_equals_the_fraction_twin(unit, fmt, rng):
    u = UNITS[unit]
    m, n, k = 4, 5, 3 * u.k
    a, b = finite(fmt, rng, (m, k)), finite(fmt, rng, (k, n))
    kw = dict(unit=unit, a_format=fmt, b_format=fmt)
    if scaled(unit):
        kw.update(scale_kw(unit, rng, m, n, k))
    c = c_values(unit, rng, (m, n))
    fast = bits(matmul(a, b, c, engine="compiled", **kw))
    assert np.array_equal(fast, bits(slow_matmul(a, b, c, **kw)))


def _special_codes(fmt):
    t = operand_table(fmt)
    return np.nonzero(t.cls == 2)[0], np.nonzero(t.cls == 1)[0]


@pytest.mark.parametrize("unit,fmt", [("sm90_wgmma_fp8", "e5m2"), ("sm100_f8f6f4", "e4m3"),
                                      ("sm90_wgmma_fp16_f16", "fp16"), ("sm100_mxf8f6f4", "e5m2"),
                                      ("cdna3_mfma_fp8", "e5m2fnuz")])
def test_outputs_left_to_numpy_nan_inf_and_overflow(unit, fmt, rng):
    """NaN / Inf operands, NaN / Inf C, NaN scales and results that overflow: the C++ code
    leaves these outputs, and the numpy step's answer is taken (against the Fraction twin)."""
    u = UNITS[unit]
    m, n, k = 6, 7, 3 * u.k
    a, b = finite(fmt, rng, (m, k)), finite(fmt, rng, (k, n))
    nans, infs = _special_codes(fmt)
    a[1, 5] = nans[0]
    if len(infs):  # (FNUZ formats have none)
        b[u.k + 2, 4] = infs[0]
    big = np.nonzero(operand_table(fmt).values == np.nanmax(np.where(np.isinf(operand_table(fmt).values), np.nan,
                                                                      operand_table(fmt).values)))[0][0]
    a[3], b[:, 5] = big, big  # output (3, 5): every product the largest: overflows fp16 outputs
    c = c_values(unit, rng, (m, n))
    c[0, 0], c[4, 6] = np.inf, np.nan
    if u.c_format != "fp16":
        c[2, 2] = np.float32(3e38)  # overflows fp32 with the products
    kw = dict(unit=unit, a_format=fmt, b_format=fmt)
    if scaled(unit):
        kw.update(scale_kw(unit, rng, m, n, k))
        kw["a_scales"][5, 0] = 0xFF  # a NaN scale
    fast = engines(a, b, c, **kw)
    assert np.array_equal(fast, bits(slow_matmul(a, b, c, **kw)))
    assert fast[1, 0] == 0x7FFFFFFF and fast[0, 0] != 0  # NaN row; Inf C stays Inf (or NaN with -Inf)


def test_wide_exponents_and_subnormal_results(rng):
    """C and products spanning float32's range, results in the subnormal range of the output."""
    for unit, fmt in (("sm100_f16", "fp16"), ("sm90_wgmma_fp16", "bf16"), ("sm90_mma_tf32", "tf32")):
        u = UNITS[unit]
        a, b = finite(fmt, rng, (8, 4 * u.k)), finite(fmt, rng, (4 * u.k, 8))
        c = (rng.standard_normal((8, 8)) * 2.0 ** rng.integers(-149, 120, (8, 8))).astype(np.float32)
        engines(a, b, c, unit=unit, a_format=fmt, b_format=fmt)


@pytest.mark.slow
def test_compiled_tiles_over_processes_equal_one_process(rng):
    a, b = finite("e4m3", rng, (70, 256)), finite("e4m3", rng, (256, 50))
    kw = dict(unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
    one = bits(matmul(a, b, None, engine="numpy", **kw))
    assert np.array_equal(bits(matmul(a, b, None, engine="compiled", jobs=2, tile=(32, 16), **kw)), one)


def test_engine_argument_is_checked(monkeypatch):
    a = np.zeros((1, 32), np.uint8)
    with pytest.raises(ValueError, match="engine must be one of auto, compiled, numpy, got 'fast'"):
        matmul(a, a.T, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", engine="fast")
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    compiled._LIBRARY.forget()
    try:
        with pytest.raises(ValueError, match="engine='compiled' is unavailable: .*no C\\+\\+ compiler"):
            matmul(a, a.T, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3", engine="compiled")
        # auto falls back to numpy, with the same bits
        with pytest.warns(RuntimeWarning, match="runs the numpy path instead"):
            out = matmul(a, a.T, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3")
        assert bits(out).tolist() == [[0]]
    finally:
        compiled._LIBRARY.forget()


def test_both_term_widths_are_exercised():
    """The int32-lane terms (F = 13 FP8, CDNA3 FP8 groups) and the int64 ones (F = 25) are both
    what the units above take, so both code paths are held to numpy."""
    def narrow(unit, fmt):
        t = operand_table(fmt)
        top = int(t.sig[t.cls == 0].max())
        return compiled.narrow_terms(UNITS[unit], top, top, t.man_bits, t.man_bits)
    assert narrow("sm90_wgmma_fp8", "e4m3") and narrow("sm89_mma_fp8", "e5m2")
    assert narrow("cdna3_mfma_fp8", "e4m3fnuz")
    assert narrow("sm90_wgmma_fp16", "fp16")  # 16 * 2047^2 * 2^5 < 2^31, just
    assert not narrow("sm100_f8f6f4", "e4m3") and not narrow("sm100_f8f6f4", "e2m1")


@pytest.mark.parametrize("unit,fmt", [("sm90_wgmma_fp16", "fp16"), ("sm90_wgmma_fp8", "e4m3"),
                                      ("cdna3_mfma_fp8", "e4m3fnuz"), ("sm100_f8f6f4", "e4m3")])
def test_terms_at_the_bound_of_their_width(unit, fmt, rng):
    """Every product the largest significand, one sign: a step's terms sum to the bound the
    width was chosen by (int32 for the first three)."""
    t = operand_table(fmt)
    fin = np.nonzero(t.cls == 0)[0]
    top = fin[np.argmax(np.where(t.sign[fin] > 0, t.values[fin], -np.inf))]
    L = UNITS[unit].k
    a, b = np.full((3, 4 * L), top), np.full((4 * L, 2), top)
    a[1, ::3] = fin[np.argmax(t.sig[fin] * (t.exp[fin] == t.exp[top]) * (t.sign[fin] > 0))]  # same exponent
    engines(a, b, None, unit=unit, a_format=fmt, b_format=fmt)
    engines(a, b, np.full((3, 2), -1.0, np.float32), unit=unit, a_format=fmt, b_format=fmt)


def test_one_split_under_several_units(rng):
    """Probe inference runs one Prepared under many candidate units (prep.unit = u): the
    compiled engine's term width and fit are the unit's, not the first unit's (an F = 8 unit's
    int32 lanes once overflowed under F = 35)."""
    from dataclasses import replace

    from fmtsim.mma.gemm import prepare

    a, b = finite("e4m3", rng, (6, 128)), finite("e4m3", rng, (128, 5))
    c = c_values("sm100_f8f6f4", rng, (6, 5))
    prep, _ = prepare(a, b, unit="sm100_f8f6f4", a_format="e4m3", b_format="e4m3")
    for f in (8, 13, 35, 25):
        u = replace(UNITS["sm100_f8f6f4"], name=f"f{f}", fraction_bits=f)
        prep.unit = u
        got = bits(prep.chain(c, 0, prep.k_padded))
        fresh, _ = prepare(a, b, unit=u, a_format="e4m3", b_format="e4m3")
        fresh.engine = "numpy"
        assert np.array_equal(got, bits(fresh.chain(c, 0, fresh.k_padded))), f


GROUPED = [n for n, u in UNITS.items() if u.family == "nv_grouped"]
# the pairs the units take: E8M0 per 32 (mxf4 and mxf4nvf4), UE4M3 per 16 (mxf4nvf4)
GROUPED_SCALES = [(n, sf, bs) for n in GROUPED for sf in UNITS[n].scale_formats for bs in UNITS[n].block_sizes
                  if (sf, bs) in (("e8m0", 32), ("ue4m3", 16))]


def grouped_scales(rng, sf, shape, lo=None, hi=None):
    """Scale codes: E8M0 around 2^0 (or lo..hi), UE4M3 finite codes with zeros among them."""
    if sf == "e8m0":
        return rng.integers(120 if lo is None else lo, 134 if hi is None else hi, shape)
    out = rng.integers(0x01, 0x7F, shape)
    out.flat[::5] = 0  # a zero scale: its groups are zero groups (e_zero)
    return out


@pytest.mark.parametrize("unit,sf,bs", slow_unless(GROUPED_SCALES, keep={("sm100_mxf4", "e8m0", 32),
                                                                       ("sm100_mxf4nvf4", "ue4m3", 16)}))
def test_grouped_units_equal_numpy(unit, sf, bs, rng):
    """The block-scaled FP4 units on the compiled engine against the numpy step: zero rows and
    groups, zero scales, C over float32's range, split-K and promotion."""
    u = UNITS[unit]
    m, n, k = 9, 11, 4 * u.k
    a, b = finite("e2m1", rng, (m, k)), finite("e2m1", rng, (k, n))
    a[2] = 0
    b[: u.group, 3] = 0  # one zero group in column 3
    kw = dict(unit=unit, a_format="e2m1", b_format="e2m1", scale_format=sf, block_size=bs,
              a_scales=grouped_scales(rng, sf, (m, k // bs)), b_scales=grouped_scales(rng, sf, (k // bs, n)))
    engines(a, b, c_values(unit, rng, (m, n)), **kw)
    engines(a, b, None, promote_every=2 * u.k, **kw)
    engines(a, b, c_values(unit, rng, (m, n)), split_k=[2 * u.k], **kw)


@pytest.mark.parametrize("unit,sf,bs", [("sm100_mxf4", "e8m0", 32), ("sm120_mxf4nvf4", "ue4m3", 16)])
def test_grouped_compiled_equals_the_fraction_twin(unit, sf, bs, rng):
    u = UNITS[unit]
    m, n, k = 4, 5, 2 * u.k
    a, b = finite("e2m1", rng, (m, k)), finite("e2m1", rng, (k, n))
    kw = dict(unit=unit, a_format="e2m1", b_format="e2m1", scale_format=sf, block_size=bs,
              a_scales=grouped_scales(rng, sf, (m, k // bs)), b_scales=grouped_scales(rng, sf, (k // bs, n)))
    c = c_values(unit, rng, (m, n))
    fast = bits(matmul(a, b, c, engine="compiled", **kw))
    assert np.array_equal(fast, bits(slow_matmul(a, b, c, **kw)))


def test_grouped_subnormal_results_overflow_and_specials(rng):
    """E8M0 scales near 2^-127 (results in fp32's subnormal range, rounded toward zero in the
    C++ integers), scales near 2^127 with a large C (overflow: left to numpy), NaN scales,
    and NaN / Inf C; against the numpy step and the Fraction twin."""
    unit, k = "sm100_mxf4", 128
    m, n = 6, 7
    a, b = finite("e2m1", rng, (m, k)), finite("e2m1", rng, (k, n))
    sa = grouped_scales(rng, "e8m0", (m, k // 32), 0, 12)  # tiny: products near 2^-254
    sb = grouped_scales(rng, "e8m0", (k // 32, n), 60, 80)  # together near 2^-190 .. 2^-130
    sa[4], sb[:, 6] = 250, 254  # row 4 x column 6: products near 2^250: overflow
    sa[5, 1] = 0xFF  # a NaN scale
    c = np.zeros((m, n), np.float32)
    c[0] = (rng.standard_normal(n) * 2.0**-140).astype(np.float32)  # subnormal C
    c[1, 1], c[2, 2] = np.inf, np.nan
    c[3] = 3e38
    kw = dict(unit=unit, a_format="e2m1", b_format="e2m1", scale_format="e8m0", block_size=32, a_scales=sa,
              b_scales=sb)
    fast = engines(a, b, c, **kw)
    assert np.array_equal(fast, bits(slow_matmul(a, b, c, **kw)))
    sub = (fast & 0x7F800000) == 0
    assert sub[:4].sum() > 5 and (fast[sub] & 0x7FFFFF).any()  # subnormal results, not only zeros
    # at the edge of the range: 64 products 1 x 1 under scales 2^61 x 2^60 are 2^127, and C adds
    # 1.5 * 2^127 (the sum 1.25 * 2^128: Inf), 2^127 (2^128: Inf), the float below 2^127 (the
    # sum rounds toward zero to the largest finite) or 0
    ones_a, ones_b = np.full((4, 64), 2), np.full((64, 1), 2)  # E2M1 code 2 is 1.0
    edge = np.array([[1.5 * 2.0**127], [2.0**127], [np.float32(2.0**127) - np.float32(2.0**103)], [0.0]],
                    np.float32)
    kw.update(a_scales=np.full((4, 2), 127 + 61), b_scales=np.full((2, 1), 127 + 60))
    got = engines(ones_a, ones_b, edge, **kw)
    assert got[:, 0].tolist() == [0x7F800000, 0x7F800000, 0x7F7FFFFF, 0x7F000000]


def test_grouped_fit_bounds():
    """The grouped step's integer bounds: every real unit's operands fit (E2M1 elements, E8M0
    or UE4M3 scales: the unit check bounds F for them); wider values or shifts do not, and
    the numpy step then runs."""
    u = UNITS["sm100_mxf4nvf4"]
    e2m1_top, ue4m3_top = 12, 15  # 6 in units of 0.5; 15 * 2^-3 the largest UE4M3 significand
    assert compiled.grouped_fit(u, e2m1_top, e2m1_top, ue4m3_top, ue4m3_top, 35 - 8)
    assert compiled.grouped_fit(u, e2m1_top, e2m1_top, 1, 1, 35 - 2)
    # 4 terms of 16 * 144 * 225 * 2^43: past 2^63
    assert not compiled.grouped_fit(u, e2m1_top, e2m1_top, ue4m3_top, ue4m3_top, 43)
    assert not compiled.grouped_fit(u, 1 << 14, 1 << 14, 1, 1, 0)  # 16 * 2^28: a group's sum past int32
    assert not compiled.grouped_fit(u, e2m1_top, e2m1_top, 1, 1, -1)


def test_one_split_under_grouped_and_fused_units(rng):
    """One Prepared of E2M1 operands with E8M0 scales per 32, run under an nv unit and an
    nv_grouped one in turn (as probe inference does): each gets its own operands."""
    from fmtsim.mma.gemm import prepare

    a, b = finite("e2m1", rng, (5, 128)), finite("e2m1", rng, (128, 6))
    kw = dict(a_format="e2m1", b_format="e2m1", scale_format="e8m0", block_size=32,
              a_scales=grouped_scales(rng, "e8m0", (5, 4)), b_scales=grouped_scales(rng, "e8m0", (4, 6)))
    c = c_values("sm100_mxf4", rng, (5, 6))
    prep, _ = prepare(a, b, unit="sm100_mxf8f6f4", **kw)
    for name in ("sm100_mxf8f6f4", "sm100_mxf4", "sm100_mxf8f6f4", "sm120_mxf4"):
        prep.unit = UNITS[name]
        got = bits(prep.chain(c, 0, prep.k_padded))
        fresh, _ = prepare(a, b, unit=name, **kw)
        fresh.engine = "numpy"
        assert np.array_equal(got, bits(fresh.chain(c, 0, fresh.k_padded))), name


FMA_UNITS = [n for n, u in UNITS.items() if u.family == "fma"]


@pytest.mark.parametrize("fmt", ["fp32", "fp64"])
def test_fma_chain_lane_by_lane(fmt, rng):
    """The C++ chain's one FMA (std::fma) against the numpy emulation (fmtsim.mma.fma) and the
    Fraction rounding of a b + c, on test_mma_fma's lanes: ties, cancellations, double-rounding
    traps, subnormals, both ends of the range, signed zeros, Inf, NaN. Lane i is output (i, i)
    of a K = 1 chain of 100 lanes at a time."""
    from fmtsim.mma import fma as fma_mod

    from .test_mma_fma import _exact, _pools, _same

    a, b, c = _pools(rng, fmt, 2000)
    want_numpy, want_exact = fma_mod.fma(a, b, c), _exact(a, b, c, fmt)
    got = np.empty_like(c)
    for i in range(0, a.size, 100):
        sl = slice(i, i + 100)
        d = compiled.fma_chain(a[sl, None], b[None, sl], np.diag(c[sl]), 0, 1)
        got[sl] = np.diagonal(d)
    assert _same(got, want_numpy).all() and _same(got, want_exact).all()


@pytest.mark.parametrize("unit", FMA_UNITS)
def test_fma_units_equal_numpy(unit, rng):
    """Whole chains through matmul: the compiled engine against the numpy one (NaN results
    canonical on both), with split-K and promotion, on operands mixing every kind of lane."""
    from .test_mma_fma import SPEC, _pools

    u = UNITS[unit]
    fmt = u.formats[0]
    udt, fdt = SPEC[fmt][:2]
    m, n, k = 13, 17, 40
    a, _, _ = _pools(rng, fmt, m * k)
    b, _, c = _pools(rng, fmt, k * n)
    A, B, C = a.reshape(m, k).view(udt), b.reshape(k, n).view(udt), c[: m * n].reshape(m, n)
    for extra in ({}, {"split_k": 3}, {"promote_every": 8}):
        kw = dict(unit=unit, a_format=fmt, b_format=fmt, **extra)
        fast = matmul(A, B, C, engine="compiled", **kw)
        ref = matmul(A, B, C, engine="numpy", **kw)
        assert fast.dtype == ref.dtype == u.out_dtype
        assert np.array_equal(fast.view(udt), ref.view(udt)), extra
    ordinary = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-20, 20, (m, k))).astype(fdt).view(udt)
    kw = dict(unit=unit, a_format=fmt, b_format=fmt)
    assert np.array_equal(matmul(ordinary, B, C, engine="compiled", **kw).view(udt),
                          bits_of(slow_matmul(ordinary, B, C, **kw), udt))


def bits_of(x, udt):
    return np.asarray(x).view(udt)


@pytest.mark.parametrize("unit", FMA_UNITS)
def test_fma_units_signed_zeros_nan_payloads_and_tile_edges(unit, rng):
    """IEEE's signed zeros through a chain (C = -0.0 with +0 and -0 products: -0 + +0 is +0,
    -0 + -0 stays -0), signalling and quiet NaNs of different payloads in A and C (written as
    the canonical NaN by both engines), and a shape over the C++ tiles' edges (9 rows: one past
    the 8-row block; 257 columns: one past 256)."""
    u = UNITS[unit]
    fmt = u.formats[0]
    wide_ = fmt == "fp64"
    udt, fdt = (np.uint64, np.float64) if wide_ else (np.uint32, np.float32)
    one, snan, qnan = (0x3FF0000000000000, 0x7FF0000000000001, 0xFFF8000000000123) if wide_ else \
        (0x3F800000, 0x7F800001, 0xFFC00123)
    m, n, k = 9, 257, 3
    a = (rng.standard_normal((m, k)) * 2.0 ** rng.integers(-10, 10, (m, k))).astype(fdt).view(udt)
    b = (rng.standard_normal((k, n)) * 2.0 ** rng.integers(-10, 10, (k, n))).astype(fdt).view(udt)
    c = (rng.standard_normal((m, n))).astype(fdt)
    a[0], b[:, 0], c[0, 0] = 0, one, -0.0  # +0 products into -0.0: +0
    a[1] = np.array(-0.0, fdt).view(udt)
    c[1, 0] = -0.0  # -0 products into -0.0: -0
    a[2, 1], c[3, 4] = snan, np.array(qnan, udt).view(fdt)
    kw = dict(unit=unit, a_format=fmt, b_format=fmt)
    fast = matmul(a, b, c, engine="compiled", **kw).view(udt)
    assert np.array_equal(fast, matmul(a, b, c, engine="numpy", **kw).view(udt))
    assert fast[0, 0] == 0 and fast[1, 0] == np.array(-0.0, fdt).view(udt)
    canonical = 0x7FFFFFFFFFFFFFFF if wide_ else 0x7FFFFFFF
    assert (fast[2] == canonical).all() and fast[3, 4] == canonical
    assert np.array_equal(fast[4:], bits_of(slow_matmul(a[4:], b, c[4:], **kw), udt))
