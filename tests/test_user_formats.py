"""User-defined formats as a documented API: define_format / parse_format (and spec strings wherever a
format name goes), validated with clear errors, and one run through every public entry point. Where a
user format has a built-in's parameters it must be that format code for code, which ml_dtypes holds."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim import formats
from fmtsim.oracle import encode_one


@pytest.fixture
def myfp6():
    f = fmtsim.define_format("myfp6", 3, 2, bias=2, specials="none")
    yield f
    formats.forget_format("myfp6")


X16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


@pytest.mark.parametrize("spec, builtin, dtype", [
    ("e4m3b7_fn", "e4m3", "float8_e4m3fn"), ("e5m2", "e5m2", "float8_e5m2"),
    ("e4m3b8_fnuz", "e4m3fnuz", "float8_e4m3fnuz"), ("e3m4", "e3m4", "float8_e3m4"),
    ("e2m1b1_none", "e2m1", "float4_e2m1fn"), ("e4m3b11_fnuz", "e4m3b11fnuz", "float8_e4m3b11fnuz")])
def test_a_spec_with_a_built_ins_parameters_is_that_format(spec, builtin, dtype):
    f, b = fmtsim.parse_format(spec), fmtsim.get_format(builtin)
    assert f.name == fmtsim.parse_format(spec).name and f is not b
    # every code's value is ml_dtypes' (an independent reading of the same encoding)
    dt = np.dtype(getattr(ml_dtypes, dtype))
    codes = np.arange(f.n_codes, dtype=np.uint8)
    theirs = codes.view(dt).astype(np.float32) if f.bits == 8 else codes.view(dt).astype(np.float32)
    assert np.array_equal(fmtsim.decode(codes, f), theirs, equal_nan=True)
    # and every encode is the built-in's, under the policies both resolve to alike
    nan = None if f.has_nan else "zero"
    for rounding in ("rne", "rtz", "rto"):
        for overflow in ("satfinite", "nonsat"):
            assert np.array_equal(fmtsim.encode(X16, f, rounding=rounding, overflow=overflow, nan=nan),
                                  fmtsim.encode(X16, b, rounding=rounding, overflow=overflow, nan=nan))


@pytest.mark.parametrize("spec, dtype", [("e5m10", np.float16), ("e8m7", ml_dtypes.bfloat16)])
def test_sixteen_bit_user_formats_are_float16_and_bfloat16(spec, dtype, rng):
    """Formats wider than a byte (uint16 codes) against numpy's float16 and ml_dtypes' bfloat16: every
    code decoded, and float32 inputs encoded (both convert float32 by round to nearest even; numpy's
    float16 converts float64 in one rounding too), through the exact float64 engine."""
    f = fmtsim.parse_format(spec)
    codes = np.arange(1 << 16, dtype=np.uint16)
    assert f.bits == 16 and f.code_dtype == np.uint16
    assert np.array_equal(fmtsim.decode(codes, f, np.float32), codes.view(dtype).astype(np.float32), equal_nan=True)
    x32 = np.concatenate([rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
                          codes.view(dtype).astype(np.float32),
                          np.float32([np.inf, -np.inf, 65520.0, 65519.996, 3.4e38, 1e-45, -0.0])])
    x32 = x32[~np.isnan(x32)]  # NaN payloads: numpy keeps some, fmtsim gives the quiet NaN of the sign
    with np.errstate(over="ignore"):
        want = x32.astype(dtype).view(np.uint16)
    got = fmtsim.encode(x32, f, overflow="nonsat")
    assert got.dtype == np.uint16 and np.array_equal(got, want), x32[got != want][:4]
    if dtype is np.float16:
        x64 = x32.astype(np.float64) * (1 + rng.uniform(-2**-20, 2**-20, x32.size))
        with np.errstate(over="ignore"):
            assert np.array_equal(fmtsim.encode(x64, f, overflow="nonsat"), x64.astype(np.float16).view(np.uint16))
    # and the Fraction twin on a sample, flags included
    sample = rng.choice(x32, 300, replace=False)
    codes_, flags = fmtsim.encode_with_flags(sample, f, overflow="nonsat")
    for i, v in enumerate(sample):
        assert (int(codes_[i]), int(flags[i])) == encode_one(float(v), f, overflow="nonsat", src="float32"), v


def test_define_format_validates(myfp6):
    with pytest.raises(ValueError, match="lower-case letters"):
        fmtsim.define_format("My-FP", 3, 2)
    with pytest.raises(ValueError, match="taken by a built-in"):
        fmtsim.define_format("fp4", 2, 1)
    with pytest.raises(ValueError, match="17 bits; fmtsim's codes are uint8 or uint16, so a format has 2..16 bits"):
        fmtsim.define_format("wide", 8, 8)
    with pytest.raises(ValueError, match="needs exp_bits >= 2 and man_bits >= 1"):
        fmtsim.define_format("e3m0", 3, 0)
    with pytest.raises(ValueError, match="needs a sign"):
        fmtsim.define_format("ufnuz", 4, 3, signed=False, specials="fnuz")
    with pytest.raises(ValueError, match="unknown specials 'nan'"):
        fmtsim.define_format("x1", 4, 3, specials="nan")
    with pytest.raises(ValueError, match="float32's range"):
        fmtsim.define_format("tiny", 5, 2, bias=150)
    with pytest.raises(TypeError, match="bias must be an int"):
        fmtsim.define_format("x2", 4, 3, bias=7.0)
    with pytest.raises(ValueError, match="already defined otherwise"):
        fmtsim.define_format("myfp6", 3, 2, bias=3, specials="none")
    assert fmtsim.define_format("myfp6", 3, 2, bias=2, specials="none") is myfp6  # the same again: the same one
    with pytest.raises(ValueError, match="not a format spec"):
        fmtsim.parse_format("e4m3x")
    with pytest.raises(ValueError, match="spec strings"):
        fmtsim.get_format("e4m3x")


def test_one_user_format_through_every_entry_point(myfp6, tmp_path, capsys, rng):
    f = fmtsim.get_format("MyFP6")
    assert f is myfp6 and "myfp6" in formats.user_formats()
    # its numbers, by hand: e3m2, bias 2: max 1.75 * 2^(7-2) = 56, smallest subnormal 2^(1-2) / 4 = 1/8
    assert (f.max_finite, f.min_positive, f.bits, f.has_nan, f.has_inf) == (56, 0.125, 6, False, False)
    x = np.float32([0.0, 0.125, 0.1875, 1.3, -56, 100, 0.0625])
    codes = fmtsim.encode(x, "myfp6")
    # 1.0 is 0x08 (exponent field 2); 0.1875 ties to the even 0x02, 0.0625 to 0
    assert codes.tolist() == [0x00, 0x01, 0x02, 0x09, 0x3F, 0x1F, 0x00]
    assert fmtsim.decode(codes, "myfp6").tolist() == [0, 0.125, 0.25, 1.25, -56, 56, 0]
    c, fl = fmtsim.encode_with_flags(x, "myfp6")
    assert fl.tolist()[3] == 1 and fl.tolist()[5] & 4  # 1.3 inexact; 100 overflows (saturated)
    assert fmtsim.quantize(x, "myfp6").tolist() == [0, 0.125, 0.25, 1.25, -56, 56, 0]
    # the Fraction twin agrees everywhere on a sample, every rounding mode
    sample = np.concatenate([f.values, f.values * 1.07, rng.standard_normal(200) * 30]).astype(np.float32)
    for mode in ("rne", "rna", "rtz", "rup", "rdn", "rnz", "rnm", "rnp", "rto"):
        got = fmtsim.encode(sample, "myfp6", rounding=mode)
        assert got.tolist() == [encode_one(float(v), "myfp6", mode)[0] for v in sample], mode
    # blocks: OCP MX's conversion with this element ('mx_<format>'), by the spec's formula
    blocks = (rng.standard_normal((8, 32)) * 40).astype(np.float32)
    q = fmtsim.mx.quantize(blocks, "mx_myfp6")
    amax = np.abs(blocks).max(axis=1)
    want_scale = np.floor(np.log2(amax)).astype(int) - f.emax + 127
    assert q.scales.ravel().tolist() == want_scale.tolist() and q.element_format is f
    scaled = blocks / np.exp2(want_scale - 127)[:, None].astype(np.float32)
    assert np.array_equal(q.codes, fmtsim.encode(scaled, "myfp6"))
    assert np.array_equal(fmtsim.mx.dequantize(q), fmtsim.decode(q.codes, f) * np.exp2(want_scale - 127)[:, None])


def test_a_spec_string_through_the_command_line(capsys, tmp_path):
    from fmtsim.cli import main

    assert main(["encode", "e3m4b5_fn", "7.5", "100"]) == 0
    out = capsys.readouterr().out
    assert out.lower().count("0x7e") >= 2  # 7.5 is max finite (1.875 * 2^2); 100 saturates to it
    assert main(["table", "ue5m3_none"]) == 0
    assert "122880" in capsys.readouterr().out  # 1.875 * 2^(31-15): the largest value
    assert main(["gen", "f32_to_e3m4b5_fn", "-o", str(tmp_path / "v")]) == 0
    tv = tmp_path / "v" / "f32_to_e3m4b5_fn.rne.satfinite.encode_ties.tv"
    assert main(["ver", str(tv), str(tv)]) == 0
