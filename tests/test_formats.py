"""Format records against the numbers of the OCP MX v1.0 and OFP8 rev 1.0 tables, and of the
ml_dtypes 0.6 / LLVM APFloat definitions of E4M3 (IEEE-style), E3M4 and E4M3B11FNUZ
(docs/rules.md §1), typed by hand."""

from fractions import Fraction as F

import numpy as np
import pytest

import fmtsim
from fmtsim import get_format
from fmtsim.oracle import value_of

# name: (bits, max finite, min normal, min subnormal, NaN codes, Inf codes, has -0, emax_elem)
SPEC = {
    "e2m1": (4, F(6), F(1), F(1, 2), (), (), True, 2),
    "e3m2": (6, F(28), F(1, 4), F(1, 16), (), (), True, 4),
    "e2m3": (6, F(15, 2), F(1), F(1, 8), (), (), True, 2),
    "e4m3": (8, F(448), F(1, 2**6), F(1, 2**9), (0x7F, 0xFF), (), True, 8),
    "e4m3fnuz": (8, F(240), F(1, 2**7), F(1, 2**10), (0x80,), (), False, 7),
    "e5m2": (8, F(57344), F(1, 2**14), F(1, 2**16), (0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF),
             (0x7C, 0xFC), True, 15),
    "e5m2fnuz": (8, F(57344), F(1, 2**15), F(1, 2**17), (0x80,), (), False, 15),
    "e8m0": (8, F(2**127), F(1, 2**127), None, (0xFF,), (), False, 127),
    "ue4m3": (7, F(448), F(1, 2**6), F(1, 2**9), (0x7F,), (), False, 8),
    # IEEE 754-style: exponent field all ones is Inf (mantissa 0) or NaN; bias 7 and 3
    "e4m3ieee": (8, F(240), F(1, 2**6), F(1, 2**9), (*range(0x79, 0x80), *range(0xF9, 0x100)),
                 (0x78, 0xF8), True, 7),
    "e3m4": (8, F(31, 2), F(1, 4), F(1, 2**6), (*range(0x71, 0x80), *range(0xF1, 0x100)),
             (0x70, 0xF0), True, 3),
    # bias 11, FNUZ: 0x80 the only NaN, no Inf, no -0
    "e4m3b11fnuz": (8, F(30), F(1, 2**10), F(1, 2**13), (0x80,), (), False, 4),
}


@pytest.mark.parametrize("name", list(SPEC))
def test_float_formats_match_spec_table(name):
    bits, mx, mn, sub, nans, infs, negzero, emax = SPEC[name]
    f = get_format(name)
    assert f.bits == bits
    assert f.max_finite == mx
    assert f.min_normal == mn
    assert f.min_subnormal == sub
    assert f.nan_codes == nans
    assert f.inf_codes == infs
    assert f.has_neg_zero == negzero
    assert f.emax == emax


def test_spec_named_codes():
    # OFP8: E4M3 448 is S.1111.110; FNUZ 240 is S.1111.111; E8M0 0xFE is 2^127, 0x00 2^-127
    assert get_format("e4m3").code_value(0x7E) == 448
    assert get_format("e4m3fnuz").code_value(0x7F) == 240
    assert get_format("e8m0").code_value(0xFE) == F(2**127)
    assert get_format("e8m0").code_value(0x00) == F(1, 2**127)
    assert get_format("e5m2").code_value(0x7B) == 57344
    # MX INT8: code * 2^-6, 0x80 = -2.0, 0x7F = 127/64, 0x01 = 2^-6
    mx = get_format("mxint8")
    assert mx.code_value(0x80) == -2 and mx.code_value(0x7F) == F(127, 64)
    assert mx.code_value(0x01) == F(1, 64) and mx.emax == 0
    # IEEE-style E4M3: 240 is S.1110.111, S.1111.000 is Inf; E3M4: 15.5 is S.110.1111
    ieee = get_format("e4m3ieee")
    assert ieee.code_value(0x77) == 240 and ieee.code_value(0xF8) == -np.inf and ieee.code_value(0x01) == F(1, 2**9)
    assert get_format("e3m4").code_value(0x6F) == F(31, 2) and get_format("e3m4").code_value(0x70) == np.inf
    # E4M3B11FNUZ: 30 is 0.1111.111, 1.0 is 0.1011.000 (exponent field = bias)
    b11 = get_format("e4m3b11fnuz")
    assert b11.code_value(0x7F) == 30 and b11.code_value(0x58) == 1 and b11.code_value(0xD8) == -1


def test_integer_ranges():
    assert (get_format("int4").min_finite, get_format("int4").max_finite) == (-8, 7)
    assert (get_format("uint4").min_finite, get_format("uint4").max_finite) == (0, 15)
    assert (get_format("int8").min_finite, get_format("int8").max_finite) == (-128, 127)
    assert (get_format("uint8").min_finite, get_format("uint8").max_finite) == (0, 255)
    assert (get_format("int2").min_finite, get_format("int2").max_finite) == (-2, 1)
    assert (get_format("uint2").min_finite, get_format("uint2").max_finite) == (0, 3)


@pytest.mark.parametrize("name", [n for n in fmtsim.FORMATS if fmtsim.FORMATS[n].ml_dtype is not None
                                  and fmtsim.FORMATS[n].kind == "int"])
def test_integer_values_equal_ml_dtypes(name):
    # ml_dtypes' narrow integers hold one code in the low bits of a byte (its README); numpy's int8/uint8 are the
    # byte itself
    f = get_format(name)
    codes = np.arange(f.n_codes, dtype=np.uint8)
    ref = codes.view(f.ml_dtype).astype(np.int64)
    assert np.array_equal(ref, f.values.astype(np.int64))
    assert np.array_equal(fmtsim.decode(codes, name, np.float64), ref.astype(np.float64))


@pytest.mark.parametrize("name", list(fmtsim.FORMATS))
def test_record_values_equal_oracle_field_decode(name):
    f = get_format(name)
    for c in range(f.n_codes):
        a, b = f.code_value(c), value_of(c, f)
        if isinstance(b, str):
            assert f.code_class(c) == ("nan" if b == "nan" else "inf")
            assert np.isnan(f.values[c]) == (b == "nan")
        else:
            assert a == b and f.values[c] == float(b)


@pytest.mark.parametrize("name", [n for n in fmtsim.FORMATS if fmtsim.FORMATS[n].ml_dtype is not None
                                  and fmtsim.FORMATS[n].kind == "float"])
def test_values_equal_ml_dtypes(name):
    f = get_format(name)
    ref = np.arange(f.n_codes, dtype=np.uint8).view(f.ml_dtype).astype(np.float64)
    ours = f.values
    assert np.array_equal(np.isnan(ref), np.isnan(ours))
    ok = ~np.isnan(ref)
    assert np.array_equal(ref[ok], ours[ok])
    assert np.array_equal(np.signbit(ref[ok]), np.signbit(ours[ok]))
    fi = __import__("ml_dtypes").finfo(f.ml_dtype)
    assert float(f.max_finite) == float(fi.max)
    assert float(f.min_normal) == float(fi.smallest_normal)


def test_aliases_and_unknown_names():
    assert get_format("float8_e4m3fn").name == "e4m3"
    assert get_format("FP4").name == "e2m1"
    assert get_format("float8_e8m0fnu").name == "e8m0"
    assert get_format("float6_e3m2fn").name == "e3m2"
    assert get_format("float8_e5m2fnuz").name == "e5m2fnuz"
    # ml_dtypes' float8_e4m3 is the IEEE-style E4M3 (Inf, max 240); fmtsim's e4m3 and fp8_e4m3 stay OCP's FN
    assert get_format("float8_e4m3").name == "e4m3ieee" and get_format("fp8_e4m3").name == "e4m3"
    assert get_format("float8_e3m4").name == "e3m4"
    assert get_format("float8_e4m3b11fnuz").name == "e4m3b11fnuz"
    assert (get_format("s2").name, get_format("u2").name) == ("int2", "uint2")
    with pytest.raises(ValueError, match="known formats: e2m1, e3m2"):
        get_format("fp8")
    with pytest.raises(TypeError):
        get_format(3)  # type: ignore[arg-type]


def test_every_code_has_one_meaning():
    for f in fmtsim.FORMATS.values():
        classes = [f.code_class(c) for c in range(f.n_codes)]
        assert len(classes) == f.n_codes
        finite = [c for c in range(f.n_codes) if classes[c] not in ("nan", "inf")]
        vals = [f.code_value(c) for c in finite]
        # only +0 and -0 share a value
        assert len(set(vals)) == len(vals) - (1 if f.has_neg_zero else 0)


def test_same_path_formats_share_what_the_code_branches_on():
    # tests/conftest.py runs these formats' heaviest per-format tests in the full tier only, on this ground
    from .conftest import SAME_PATH_AS

    for new, old in SAME_PATH_AS.items():
        a, b = get_format(new), get_format(old)
        assert (a.kind, a.specials, a.signed, a.subnormals) == (b.kind, b.specials, b.signed, b.subnormals), new
