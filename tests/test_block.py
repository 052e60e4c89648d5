"""Block scaling: worked examples, an independent slow reference, properties, specials."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fmtsim
from fmtsim import intq, mx, nvfp4
from fmtsim.schemes import effective_bits

from .slow_reference import intq_reference, mx_reference

W = np.array([0.12, -0.53, 0.88, -0.07, 0.31, 1.40, -0.95, 0.02])


def mse(a, b):
    return float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))


# ---- worked examples (numbers from the seed documents) --------------------------------

def test_int4_per_tensor_worked_example():
    q = intq.quantize(W, 4, scale_dtype=np.float64)
    assert float(q.scale) == 1.40 / 7  # 0.2
    assert q.codes.tolist() == [1, -3, 4, 0, 2, 7, -5, 0]
    assert mse(intq.dequantize(q, np.float64), W) == pytest.approx(0.0042, abs=1e-12)


def test_int4_groups_of_four_and_outlier():
    q = intq.quantize(W, 4, group_size=4, scale_dtype=np.float64)
    assert mse(intq.dequantize(q, np.float64), W) == pytest.approx(0.0018592, abs=1e-6)
    w2 = W.copy()
    w2[5] = 14.0
    q2 = intq.quantize(w2, 4, scale_dtype=np.float64)
    assert q2.codes.tolist() == [0, 0, 0, 0, 0, 7, 0, 0]
    d2 = intq.dequantize(q2, np.float64)
    assert mse(d2, w2) == pytest.approx(0.2592, abs=1e-12)
    keep = np.arange(8) != 5
    before = mse(intq.dequantize(intq.quantize(W, 4, scale_dtype=np.float64), np.float64)[keep], W[keep])
    after = mse(d2[keep], w2[keep])
    assert before == pytest.approx(0.0048, abs=1e-12)
    assert after == pytest.approx(0.2962285714, abs=1e-9)
    assert after / before == pytest.approx(61.7142857, abs=1e-6)


def test_asymmetric_worked_examples():
    q = intq.quantize(np.array([1.0, 2.0]), 4, symmetric=False, scale_dtype=np.float64)
    assert float(q.scale) == 2 / 15 and int(q.zero_point) == 0
    q = intq.quantize(np.array([0.0, 0.0]), 4, symmetric=False)
    assert float(q.scale) == 1.0 and int(q.zero_point) == 0 and q.codes.tolist() == [0, 0]
    six = np.array([0, 0.2, 0.5, 0.9, 1.3, 2.0])
    assert intq.quantize(six, 4, symmetric=False, scale_dtype=np.float64).codes.tolist() == [0, 2, 4, 7, 10, 15]
    # the 0.2 tie is decided by the stored scale: float32(2/15) is just above 2/15
    assert Fraction(float(np.float32(2 / 15))) > Fraction(2, 15)
    assert intq.quantize(six, 4, symmetric=False).codes.tolist() == [0, 1, 4, 7, 10, 15]


def test_mxfp4_worked_examples():
    x = np.array([0.3, -1.2, 2.4, 5.0], np.float32)
    q = mx.quantize(x, "mxfp4", block_size=4)
    assert q.scales.tolist() == [127]  # X = 1
    d = mx.dequantize(q)
    assert d.tolist() == [0.5, -1.0, 2.0, 4.0]  # 5.0 is a tie -> 4
    assert mse(d, x) == pytest.approx(0.31, abs=1e-6)
    y = np.zeros(32, np.float32)
    y[0] = 3.5
    q = mx.quantize(y, "mxfp4")
    assert q.scales.tolist() == [126] and mx.dequantize(q)[0] == 3.0  # X = 0.5; 7 clamps to 6


def test_mxfp4_amax_just_below_eight_uses_integer_exponent():
    a = np.array([0x40FFFFFF], np.uint32).view(np.float32)[0]
    assert np.floor(np.log2(a)) == 3.0  # the trap: a float log2 rounds up
    y = np.zeros(32, np.float32)
    y[0] = a
    q = mx.quantize(y, "mxfp4")
    assert q.scales.tolist() == [127]
    assert mx.dequantize(q)[0] == 6.0


def test_nvfp4_worked_example_and_recipes_part():
    x = np.zeros(16, np.float32)
    x[:4] = [0.3, -1.2, 2.4, 5.0]
    for recipe in nvfp4.RECIPES:
        q = nvfp4.quantize(x, global_scale=1.0, recipe=recipe)
        assert fmtsim.decode(q.scales, "ue4m3").tolist() == [0.8125]
        assert fmtsim.decode(q.codes[:4], "e2m1").tolist() == [0.5, -1.5, 3.0, 6.0]
        d = nvfp4.dequantize(q)
        assert d[:4].tolist() == [0.40625, -1.21875, 2.4375, 4.875]
        assert mse(d[:4], x[:4]) == pytest.approx(0.0072, abs=5e-5)
    # docs/rules.md §4: global amax 1000, block amax 0.01: torchao 0x08, TE 0x02
    y = np.zeros((1, 32), np.float32)
    y[0, 0], y[0, 16] = 1000, 0.01
    assert nvfp4.quantize(y, recipe="te").scales[0, 1] == 0x02
    assert nvfp4.quantize(y, recipe="torchao").scales[0, 1] == 0x08


def test_effective_bits():
    assert effective_bits("mxfp4") == 4.25
    assert effective_bits("int4", group_size=128, scale_bits=16) == 4.125
    assert effective_bits("mxfp8_e4m3") == 8.25 and effective_bits("mxfp6_e2m3") == 6.25
    assert effective_bits("nvfp4") == 4.5
    assert effective_bits("nvfp4", tensor_elements=4096) == 4.5 + 32 / 4096
    assert effective_bits("uint4", group_size=64, scale_bits=16, zero_point_bits=4) == 4 + 20 / 64


# ---- the slow reference ---------------------------------------------------------------

def special_rows():
    """All-zero; one outlier; amax exactly 2^k; amax 0x40FFFFFF; float32 subnormals;
    NaN; -Inf; element ties after scaling; amax near FLT_MAX."""
    def row(**at):
        r = np.zeros(32, np.float32)
        for k, v in at.items():
            r[int(k[1:])] = v
        return r

    rows = [row(), row(i3=1e30), row(i0=4.0, i1=-0.0),
            row(i0=np.array([0x40FFFFFF], np.uint32).view(np.float32)[0])]
    sub = np.full(32, np.float32(1e-40))
    sub[1] = -3e-41
    rows += [sub, row(i5=np.nan), row(i7=-np.inf), row(i0=2.0**-140, i1=5.0, i2=5.5, i3=6.5),
             np.full(32, np.float32(3.4e38))]
    return np.stack(rows)


@pytest.mark.parametrize("scheme", list(mx.SCHEMES))
@pytest.mark.parametrize("rule", mx.SCALE_RULES)
def test_mx_equals_slow_reference(scheme, rule, rng):
    elem = mx.SCHEMES[scheme]
    x = np.concatenate([special_rows(),
                        (rng.standard_normal((3, 32)) * np.exp2(rng.integers(-20, 20, (3, 1)))).astype(np.float32)])
    q = mx.quantize(x, scheme, scale_rule=rule)
    s_ref, c_ref = mx_reference(x, elem, rule)
    assert np.array_equal(q.scales, s_ref), (q.scales, s_ref)
    assert np.array_equal(q.codes, c_ref)


def test_mx_rna_and_flush_like_microxcaling():
    x = np.zeros((1, 32), np.float32)
    x[0, :3] = [5.0, 1e-40, 2.5]
    q = mx.quantize(x, "mxfp4", rounding="rna")
    assert mx.dequantize(q)[0, 0] == 6.0  # tie away (rne gives 4)
    s_ref, c_ref = mx_reference(x, "e2m1", rounding="rna")
    assert np.array_equal(q.codes, c_ref)
    y = np.zeros((1, 32), np.float32)
    y[0, 0] = 1e-40
    y[0, 1] = -1e-40
    assert mx.quantize(y, "mxfp8_e4m3").codes[0, 0] != 0
    assert mx.quantize(y, "mxfp8_e4m3", flush_subnormals=True).codes[0, :2].tolist() == [0, 0x80]


def test_mx_specials_documented():
    x = special_rows()
    q = mx.quantize(x, "mxfp8_e4m3")
    assert q.scales[0, 0] == 0x00 and not q.codes[0].any()  # all-zero block
    assert q.scales[5, 0] == 0xFF and not q.codes[5].any()  # NaN block
    assert q.scales[6, 0] == 0xFF
    assert np.all(np.isnan(mx.dequantize(q)[5]))
    assert q.scales[4, 0] == 0x00  # subnormal block: exponent clamped to -127
    # float64: shared exponent above 127 -> NaN scale; below -127 -> clamped
    big = np.zeros(32)
    big[0] = 2.0**200
    assert mx.quantize(big, "mxfp8_e4m3").scales.tolist() == [0xFF]
    tiny = np.zeros(32)
    tiny[0] = 2.0**-200
    assert mx.quantize(tiny, "mxfp8_e4m3").scales.tolist() == [0]


def test_mx_float64_is_exact_and_other_inputs():
    x = np.zeros(32)
    x[0] = 448.0
    x[1] = 1.0625 + 2.0**-40  # through float32 this would sit on a tie
    q = mx.quantize(x, "mxfp8_e4m3")
    assert mx.dequantize(q, np.float64)[1] == 1.125
    for dt in (np.float16, ml_dtypes.bfloat16):
        y = np.linspace(-3, 3, 64).astype(dt)
        a = mx.quantize(y, "mxfp6_e2m3")
        b = mx.quantize(y.astype(np.float32), "mxfp6_e2m3")
        assert np.array_equal(a.codes, b.codes) and np.array_equal(a.scales, b.scales)


def test_mx_padding_and_errors():
    x = np.arange(40, dtype=np.float32).reshape(1, 40)
    with pytest.raises(ValueError, match="length 40, not a multiple of the block size 32"):
        mx.quantize(x, "mxfp4")
    q = mx.quantize(x, "mxfp4", pad=True)
    assert q.codes.shape == (1, 64) and q.scales.shape == (1, 2)
    assert mx.dequantize(q).shape == (1, 40)
    with pytest.raises(ValueError, match="unknown MX scheme"):
        mx.quantize(x, "mxfp5")
    with pytest.raises(ValueError, match="unknown scale_rule"):
        mx.quantize(x, "mxfp4", pad=True, scale_rule="round")


def test_mx_stochastic_rounding_elements(rng):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    r = rng.integers(0, 2**32, x.shape, dtype=np.uint64).astype(np.uint32)
    q = mx.quantize(x, "mxfp4", rounding="sr", rbits=r)
    q0 = mx.quantize(x, "mxfp4", rounding="sr", rbits=np.zeros_like(r))
    assert np.array_equal(q0.codes, mx.quantize(x, "mxfp4", rounding="rtz").codes)
    assert np.array_equal(q.scales, q0.scales)


def test_intq_equals_slow_reference(rng):
    for bits in (2, 3, 4, 8):
        for sym in (True, False):
            x = rng.standard_normal((6, 16)) * rng.uniform(0.01, 10, (6, 1))
            x[0] = 0
            q = intq.quantize(x, bits, symmetric=sym, group_size=8)
            for blk in range(12):
                r, g = divmod(blk, 2)
                s, z, codes = intq_reference(x[r, g * 8:(g + 1) * 8], bits, sym)
                assert float(q.scale[r, g]) == s and int(q.zero_point[r, g]) == z
                assert q.codes[r, g * 8:(g + 1) * 8].tolist() == codes


def test_intq_layouts():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) - 11
    q = intq.quantize(x, 8, channel_axis=1)
    assert q.scale.shape == (1, 3, 1)
    for c in range(3):
        s, _, codes = intq_reference(x[:, c, :].ravel(), 8, True)
        assert float(q.scale[0, c, 0]) == s
    q = intq.quantize(x, 4, group_size=2, axis=-1, symmetric=False, scale_dtype=np.float16)
    assert q.scale.shape == (2, 3, 2) and q.scale.dtype == np.float16
    assert np.allclose(intq.dequantize(q, np.float64), x, atol=float(np.max(q.scale)))
    assert intq.quantize(x, 4).scale.shape == ()
    with pytest.raises(ValueError, match="bits must be 2..8"):
        intq.quantize(x, 9)


# ---- properties -----------------------------------------------------------------------

finite32 = st.floats(-1e6, 1e6, width=32, allow_subnormal=True)


@settings(max_examples=60, deadline=None)
@given(x=hnp.arrays(np.float32, (3, 64), elements=finite32), scheme=st.sampled_from(list(mx.SCHEMES)),
       rule=st.sampled_from(mx.SCALE_RULES))
def test_mx_properties(x, scheme, rule):
    q = mx.quantize(x, scheme, scale_rule=rule)
    d = mx.dequantize(q)
    # quantize is idempotent on its own output (values)
    assert np.array_equal(mx.dequantize(mx.quantize(d, scheme, scale_rule=rule)), d)
    # finite blocks never get the NaN scale from float32 input under floor
    if rule == "floor":
        assert not np.any(q.scales == 0xFF)
    # blocks are independent
    y = x.copy()
    y[:, 32:] = 0
    q2 = mx.quantize(y, scheme, scale_rule=rule)
    assert np.array_equal(q2.codes[:, :32], q.codes[:, :32]) and np.array_equal(q2.scales[:, 0], q.scales[:, 0])
    # the axis argument equals transposing
    qt = mx.quantize(x.T, scheme, scale_rule=rule, axis=0)
    assert np.array_equal(qt.codes.T, q.codes) and np.array_equal(qt.scales.T, q.scales)


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float32, (16, 32), elements=st.floats(-1e4, 1e4, width=32)),
       recipe=st.sampled_from(nvfp4.RECIPES), tile=st.sampled_from([(1, 16), (16, 16)]))
def test_nvfp4_properties(x, recipe, tile):
    q = nvfp4.quantize(x, recipe=recipe, tile=tile, global_scale=1.0)
    assert q.codes.shape == x.shape and q.scales.shape == (16, 2)
    if tile == (16, 16):
        assert np.all(q.scales == q.scales[:1])  # one scale per tile, repeated for its rows
    d = nvfp4.dequantize(q)
    assert np.all(np.isfinite(d)) or np.max(np.abs(x)) == 0


def test_nvfp4_amax_zero_and_nan():
    z = np.zeros((1, 16), np.float32)
    q = nvfp4.quantize(z)
    assert q.scales.tolist() == [[0]] and not q.codes.any() and nvfp4.dequantize(q).tolist() == [[0.0] * 16]
    q = nvfp4.quantize(z, recipe="torchao")
    assert q.scales.tolist() == [[0x7F]] and np.all(np.isnan(nvfp4.dequantize(q)))
    with pytest.raises(ValueError, match="NaN or Inf"):
        nvfp4.quantize(np.array([[np.nan] + [0.0] * 15], np.float32))


def test_nvfp4_te_writes_negative_zero_as_code_0():
    # TE's reference cast assigns codes by interval: [0, 0.25] -> 0 holds -0.0 (it compares
    # equal to 0), [-0.25, 0) -> 0x8. So -0.0 gives code 0 but -0.01 gives 0x8 (-0).
    x = np.zeros(16, np.float32)
    x[0], x[1], x[2] = 6.0, -0.01, -0.0
    te = nvfp4.quantize(x, global_scale=1.0, recipe="te").codes
    assert te[1] == 0x8 and te[2] == 0
    ao = nvfp4.quantize(x, global_scale=1.0, recipe="torchao").codes
    assert ao[1] == 0x8 and ao[2] == 0x8
    y = np.zeros(16, np.float32)
    y[0], y[1] = 6e4, -1e-45  # m_b = 1e-4: -1e-45 * 1e-4 is -0.0 in float32
    assert nvfp4.quantize(y, global_scale=1e4, recipe="te").codes[1] == 0


def test_global_scale_conventions():
    g = np.float32(1000 / 2688)
    assert nvfp4.global_scale_to_stored(g, "multiplier") == g
    assert nvfp4.global_scale_to_stored(g, "divisor") == np.float32(1) / g
    assert nvfp4.global_scale_from_stored(nvfp4.global_scale_to_stored(g, "divisor"), "divisor") == \
        np.float32(1) / (np.float32(1) / g)


@pytest.mark.parametrize("recipe", nvfp4.RECIPES)
@pytest.mark.parametrize("tile", [(1, 16), (16, 16)])
def test_nvfp4_equals_slow_reference(recipe, tile, rng):
    from .slow_reference import nvfp4_block

    x = (rng.standard_normal((16, 48)) * np.exp2(rng.integers(-12, 12, (16, 1)))).astype(np.float32)
    x[0, :16] = 0  # an all-zero block
    x[1, 16:32] = 1e-30  # a block tiny relative to the tensor
    x[2, 0] = 6.5e3  # the tensor amax
    x[3, 5] = -0.0
    q = nvfp4.quantize(x, recipe=recipe, tile=tile)
    g = q.global_scale
    if recipe == "te":
        enc = np.float32(min(np.float32(2688.0) / np.float32(np.max(np.abs(x))), np.finfo(np.float32).max))
        assert g == np.float32(np.float32(1.0) / enc)
    else:
        assert g == np.float32(np.float32(np.max(np.abs(x))) / np.float32(2688.0))
    rows = tile[0]
    for r0 in range(0, 16, rows):
        for c0 in range(0, 48, 16):
            tile_vals = x[r0:r0 + rows, c0:c0 + 16]
            sc, _ = nvfp4_block(tile_vals.ravel(), recipe, g)
            assert np.all(q.scales[r0:r0 + rows, c0 // 16] == sc)
            for r in range(r0, r0 + rows):
                # elements use the tile's scale; the block max only decides that scale
                _, codes = nvfp4_block(np.concatenate([x[r, c0:c0 + 16], tile_vals.ravel()]), recipe, g)
                assert q.codes[r, c0:c0 + 16].tolist() == codes[:16]
