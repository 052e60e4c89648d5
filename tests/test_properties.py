"""Round trips, order, symmetry and the named OFP8 boundary cases."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim

from .conftest import ALL_FORMATS

MODES = ["rne", "rna", "rtz", "rup", "rdn"]


def finite_codes(f):
    c = np.arange(f.n_codes)
    return c[np.isfinite(f.values)]


@pytest.mark.parametrize("name", ALL_FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_trip_every_non_nan_code_every_mode(name, dtype):
    f = fmtsim.get_format(name)
    codes = np.array([c for c in range(f.n_codes) if c not in f.nan_codes])
    x = fmtsim.decode(codes, name, dtype)
    for mode in MODES:
        for ov in ("satfinite", "nonsat"):
            got = fmtsim.encode(x, name, rounding=mode, overflow=ov)
            # Inf codes only come back as Inf without saturation
            expect = codes.copy()
            if ov == "satfinite" and f.has_inf:
                expect = np.where(np.isin(codes, f.inf_codes),
                                  np.where(codes & f.sign_mask, codes - 1, codes - 1), codes)
            assert np.array_equal(got, expect), (mode, ov)


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_monotone_and_directed(name, rng):
    f = fmtsim.get_format(name)
    span = float(f.max_finite) * 1.5
    x = np.sort(np.concatenate([rng.uniform(-span, span, 20000),
                                rng.standard_normal(5000) * float(f.min_positive) * 4]))
    if name == "e8m0":
        x = x[x > 0]  # zero and negatives are NaN in E8M0
    for mode in MODES:
        q = fmtsim.quantize(x, name, rounding=mode, dtype=np.float64)
        assert np.all(np.diff(q) >= 0), mode
        inside = (x <= float(f.max_finite)) & (x >= float(f.min_finite))  # saturation aside
        if mode == "rtz":
            assert np.all(np.abs(q[inside]) <= np.abs(x[inside]))
        if mode == "rup":
            assert np.all(q[inside] >= x[inside])
        if mode == "rdn":
            assert np.all(q[inside] <= x[inside])


@pytest.mark.parametrize("name", [n for n in ALL_FORMATS if fmtsim.FORMATS[n].kind == "float"
                                  and fmtsim.FORMATS[n].signed])
def test_sign_symmetry(name, rng):
    f = fmtsim.get_format(name)
    x = rng.uniform(0, float(f.max_finite) * 1.2, 20000)
    for mode, mirror in (("rne", "rne"), ("rna", "rna"), ("rtz", "rtz"), ("rup", "rdn")):
        pos = fmtsim.quantize(x, name, rounding=mode, dtype=np.float64)
        neg = fmtsim.quantize(-x, name, rounding=mirror, dtype=np.float64)
        assert np.array_equal(pos, -neg)


def enc(x, name, **kw):
    return int(fmtsim.encode(np.float64(x), name, **kw))


def val(x, name, **kw):
    return float(fmtsim.quantize(np.float64(x), name, dtype=np.float64, **kw))


def test_ofp8_boundaries_from_spec_notes():
    # E4M3: 464 is a tie and rounds to 448; anything above overflows
    assert val(464, "e4m3") == 448
    assert val(464, "e4m3", overflow="nonsat") == 448
    assert np.isnan(val(464.0000001, "e4m3", overflow="nonsat"))
    assert enc(465, "e4m3", overflow="nonsat") == 0x7F
    assert enc(-465, "e4m3", overflow="nonsat") == 0xFF
    assert val(465, "e4m3") == 448
    # E5M2: 61440 is a tie that rounds up to 2^16 and overflows; below it 57344
    assert val(61440, "e5m2", overflow="nonsat") == np.inf
    assert val(61439.99, "e5m2", overflow="nonsat") == 57344
    assert val(57345, "e5m2", overflow="nonsat") == 57344
    assert val(61440, "e5m2") == 57344
    # E2M1: 5.0 is a tie -> 4.0; above 6 saturates
    assert val(5.0, "e2m1") == 4.0
    assert val(7.0, "e2m1") == 6.0
    assert val(100.0, "e2m1") == 6.0
    assert val(-0.25, "e2m1") == 0.0 and enc(-0.25, "e2m1") == 0x8
    # FP6 overflow ties
    assert val(7.75, "e2m3") == 7.5 and val(30, "e3m2") == 28


def test_sat_nonsat_table_from_spec_notes():
    inf = np.inf
    rows = [
        # input, E4M3 sat, E4M3 nonsat, E5M2 sat, E5M2 nonsat (values; 'nan' for NaN)
        (inf, 448, "nan", 57344, inf),
        (-inf, -448, "nan", -57344, -inf),
        (1e6, 448, "nan", 57344, inf),
        (np.nan, "nan", "nan", "nan", "nan"),
    ]
    for x, *want in rows:
        got = [val(x, "e4m3"), val(x, "e4m3", overflow="nonsat"), val(x, "e5m2"),
               val(x, "e5m2", overflow="nonsat")]
        for g, w in zip(got, want, strict=True):
            assert (np.isnan(g) if w == "nan" else g == w), (x, got, want)


def test_fnuz_zero_and_tiny_negatives():
    for name in ("e4m3fnuz", "e5m2fnuz"):
        assert enc(-0.0, name) == 0x00
        assert enc(-1e-30, name) == 0x00
        assert enc(-1e-30, name, rounding="rdn") == 0x81  # toward -inf: the smallest negative
        assert enc(np.nan, name) == 0x80
        assert enc(np.inf, name, overflow="nonsat") == 0x80
        assert enc(np.inf, name) == 0x7F
        assert enc(-np.inf, name) == 0xFF


def test_e8m0_rules():
    # ml_dtypes: ties 1.5*2^k round up (rna); gfloat: ties to the even code (rne)
    assert enc(3.0, "e8m0", rounding="rna") == 129 and enc(3.0, "e8m0") == 128
    assert enc(0.75, "e8m0", rounding="rna") == 127 and enc(0.75, "e8m0") == 126
    assert enc(3.0, "e8m0", profile="ml_dtypes") == 129
    # satfinite clamps what has no code (docs/rules.md §2); nonsat makes it NaN; NaN is 0xFF
    for bad, code in ((0.0, 0x00), (-0.0, 0x00), (-1.0, 0x00), (np.inf, 0xFE), (-np.inf, 0x00), (np.nan, 0xFF)):
        assert enc(bad, "e8m0") == code
        assert enc(bad, "e8m0", overflow="nonsat") == 0xFF
    assert enc(2.0**-130, "e8m0") == 0x00
    assert enc(2.0**-130, "e8m0", rounding="rup") == 0x00
    # PTX cvt.rz / cvt.rp .satfinite.ue8m0x2 on positive finite inputs
    assert enc(3.0, "e8m0", rounding="rtz") == 128 and enc(3.0, "e8m0", rounding="rup") == 129
    assert enc(2.0**127 * 1.9, "e8m0", rounding="rup") == 0xFE  # satfinite
    assert enc(2.0**127 * 1.9, "e8m0", rounding="rup", overflow="nonsat") == 0xFF


def test_integer_rounding_and_ranges():
    assert list(fmtsim.encode(np.array([-9.0, -8.0, -7.5, 0.5, 1.5, 7.4, 9.0]), "int4")) == \
        [0x8, 0x8, 0x8, 0x0, 0x2, 0x7, 0x7]
    assert list(fmtsim.encode(np.array([-9.0, -7.5, 9.0]), "int4", overflow="satsym")) == \
        [0x9, 0x8 + 1, 0x7]
    assert list(fmtsim.encode(np.array([-3.0, 300.0, 2.5]), "uint8")) == [0, 255, 2]
    assert fmtsim.decode(fmtsim.encode(np.array([-2.0, 1.99]), "mxint8"), "mxint8").tolist() == \
        [-2.0, 127 / 64]
    assert fmtsim.encode(-2.0, "mxint8", overflow="satsym") == 0x81


def test_ue4m3_unsigned_clamps_negatives():
    assert enc(-3.0, "ue4m3") == 0 and enc(448, "ue4m3") == 0x7E and enc(1e9, "ue4m3") == 0x7E
    assert enc(1e9, "ue4m3", overflow="nonsat") == 0x7F
    assert enc(0.8333, "ue4m3") == fmtsim.encode(np.float32(0.8333), "e4m3")


def test_shapes_and_scalars():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2, 1:]
    out = fmtsim.encode(x, "e4m3")
    assert out.shape == x.shape and out.dtype == np.uint8
    assert np.array_equal(out, fmtsim.encode(np.ascontiguousarray(x), "e4m3"))
    assert fmtsim.encode(np.zeros((0, 3), np.float32), "e2m1").shape == (0, 3)
    s = fmtsim.encode(1.5, "e4m3")
    assert isinstance(s, np.uint8) and s == 0x3C
    assert fmtsim.decode(0x3C, "e4m3") == 1.5
    assert fmtsim.encode(np.array(3, dtype=np.int32), "e4m3") == 0x44
    assert fmtsim.encode(np.array([1.5], ml_dtypes.float8_e5m2), "e4m3")[0] == 0x3C


def test_bad_inputs_are_named():
    with pytest.raises(TypeError, match="complex"):
        fmtsim.encode(np.array([1j]), "e4m3")
    with pytest.raises(TypeError, match="object"):
        fmtsim.encode(np.array([1.0, None], dtype=object), "e4m3")
    with pytest.raises(TypeError, match="boolean"):
        fmtsim.encode(np.array([True]), "e4m3")
    with pytest.raises(ValueError, match="unknown format 'fp9'"):
        fmtsim.encode(1.0, "fp9")
    with pytest.raises(ValueError, match="unknown rounding mode 'nearest'"):
        fmtsim.encode(1.0, "e4m3", rounding="nearest")
    with pytest.raises(ValueError, match="e2m1 has no NaN encoding and 2 input"):
        fmtsim.encode(np.array([[1.0, np.nan], [np.nan, 2.0]]), "e2m1")
    with pytest.raises(ValueError, match=r"first at index \(0, 1\)"):
        fmtsim.encode(np.array([[1.0, np.nan], [np.nan, 2.0]]), "e2m1")
    with pytest.raises(ValueError, match="has no NaN encoding; nan='signed'"):
        fmtsim.encode(1.0, "e2m1", nan="signed")
    with pytest.raises(ValueError, match="needs rbits"):
        fmtsim.encode(1.0, "e4m3", rounding="sr")
    with pytest.raises(ValueError, match="only used with rounding='sr'"):
        fmtsim.encode(1.0, "e4m3", rbits=np.uint32(3))
    with pytest.raises(ValueError, match="shape"):
        fmtsim.encode(np.ones(3), "e4m3", rounding="sr", rbits=np.ones(4, np.uint32))
    with pytest.raises(TypeError, match="unsigned integer"):
        fmtsim.encode(np.ones(3), "e4m3", rounding="sr", rbits=np.ones(3))
    with pytest.raises(ValueError, match="satsym"):
        fmtsim.encode(1.0, "e4m3", overflow="satsym")
    # integers wider than float64 are rounded once, not refused (and not rounded to float64 first)
    codes, flags = fmtsim.encode_with_flags(np.array([2**60 + 1]), "e8m0", rounding="rup")
    assert (int(codes[0]), int(flags[0])) == (127 + 61, 1)


def test_decode_checks_code_range():
    with pytest.raises(ValueError, match=r"e2m1: code 31 at index 2 is outside 0..0xf"):
        fmtsim.decode(np.array([1, 2, 0x1F]), "e2m1")
    assert fmtsim.decode(np.array([1, 2, 0x1F]), "e2m1", mask=True)[2] == -6.0
    with pytest.raises(ValueError, match="ue4m3: code 128"):
        fmtsim.decode(np.array([0x80], np.uint8), "ue4m3")
    assert fmtsim.decode(np.array([0xFE], np.uint8), "ue4m3", mask=True) == 448
    assert fmtsim.decode(np.array([-1], np.int8), "int4", mask=True) == -1
    with pytest.raises(TypeError, match="integer array"):
        fmtsim.decode(np.array([1.0]), "e4m3")
    with pytest.raises(ValueError, match="float16"):
        fmtsim.decode(np.array([0], np.uint8), "e8m0", np.float16)
    assert fmtsim.decode(np.array([0x7E]), "e4m3", np.float16) == 448
    assert fmtsim.decode(np.array([0, 0xFE]), "e8m0", ml_dtypes.bfloat16).astype(float).tolist() == \
        [2.0**-127, 2.0**127]
    assert fmtsim.decode(np.zeros((2, 0), np.uint8), "e4m3").shape == (2, 0)


def test_public_api_of_the_design_contract():
    import fmtsim as f

    for name in ("FORMATS", "get_format", "decode", "encode", "quantize"):
        assert hasattr(f, name)
    for mod, names in (("mx", ("quantize", "dequantize")), ("nvfp4", ("quantize", "dequantize")),
                       ("intq", ("quantize", "dequantize")),
                       ("layout", ("pack_fp4", "unpack_fp4", "pack_fp6", "unpack_fp6", "swizzle_scales",
                                   "unswizzle_scales")),
                       ("fnuz", ("ocp_to_fnuz", "fnuz_to_ocp"))):
        for n in names:
            assert callable(getattr(getattr(f, mod), n)), (mod, n)
