"""OCP <-> FNUZ on every code: values kept exactly once the scale multiplier is applied."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.fnuz import fnuz_to_ocp, ocp_to_fnuz, scale_by_power_of_two

ALL = np.arange(256, dtype=np.uint8)


@pytest.mark.parametrize("fmt,inf", [("e4m3", None), ("e5m2", "nan"), ("e5m2", "max"), ("e5m2", "ocp_max")])
def test_every_ocp_code(fmt, inf):
    src = ALL.copy()
    out, mult, rep = ocp_to_fnuz(src, fmt, inf=inf)
    assert np.array_equal(src, ALL), "input modified"
    assert mult == 2.0
    ocp_vals = fmtsim.decode(ALL, fmt, np.float64)
    fnuz_vals = fmtsim.decode(out, fmt + "fnuz", np.float64)
    # independent check through ml_dtypes' own decoders
    ml_ocp = ALL.view(fmtsim.get_format(fmt).ml_dtype).astype(np.float64)
    ml_fnuz = out.view(fmtsim.get_format(fmt + "fnuz").ml_dtype).astype(np.float64)
    finite = np.isfinite(ocp_vals)
    assert np.array_equal(ocp_vals[finite] * 1.0, fnuz_vals[finite] * mult)
    assert np.array_equal(ml_ocp[finite], ml_fnuz[finite] * mult)
    nan = np.isnan(ocp_vals)
    assert np.all(out[nan] == 0x80)
    assert out[0x80] == 0x00
    keep = finite & (ALL != 0x80)
    assert np.array_equal(out[keep], ALL[keep]), "finite codes keep their bits"
    assert rep.neg_zero == 1 and rep.nan == (2 if fmt == "e4m3" else 6)
    if fmt == "e5m2":
        assert rep.pos_inf == 1 and rep.neg_inf == 1
        want = {"nan": (0x80, 0x80), "max": (0x7F, 0xFF), "ocp_max": (0x7B, 0xFB)}[inf]
        assert (out[0x7C], out[0xFC]) == want
        if inf == "ocp_max":
            assert fnuz_vals[0x7C] * 2 == 57344


def test_inf_must_be_chosen():
    with pytest.raises(ValueError, match="2 e5m2 Inf code.*first at flat index 1"):
        ocp_to_fnuz(np.array([0x10, 0x7C, 0xFC], np.uint8), "e5m2")
    out, _, _ = ocp_to_fnuz(np.array([0x10, 0x7B], np.uint8), "e5m2")  # no Inf: fine
    assert out.tolist() == [0x10, 0x7B]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_round_trip_on_codes_with_a_value_in_both(fmt):
    fnuz, _, _ = ocp_to_fnuz(ALL, fmt, inf="nan")
    back, mult, rep = fnuz_to_ocp(fnuz, fmt, unrepresentable="nan")
    assert mult == 0.5
    ocp_vals = fmtsim.decode(ALL, fmt, np.float64)
    ok = np.isfinite(ocp_vals) & (ALL != 0x80)
    assert np.array_equal(back[ok], ALL[ok])


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_every_fnuz_code(fmt):
    with pytest.raises(ValueError, match="exceed OCP"):
        fnuz_to_ocp(ALL, fmt)
    for choice in ("nan", "max") + (("inf",) if fmt == "e5m2" else ()):
        out, mult, rep = fnuz_to_ocp(ALL, fmt, unrepresentable=choice)
        fv = fmtsim.decode(ALL, fmt + "fnuz", np.float64)
        ov = fmtsim.decode(out, fmt, np.float64)
        repr_ok = np.abs(fv) * 2 <= float(fmtsim.get_format(fmt).max_finite)
        assert np.array_equal(fv[repr_ok], ov[repr_ok] * mult)
        assert np.isnan(ov[0x80]) and out[0x80] == 0x7F
        assert rep.unrepresentable == int((~repr_ok & ~np.isnan(fv)).sum())
        big = ~repr_ok & ~np.isnan(fv)
        if choice == "nan":
            assert np.all(np.isnan(ov[big]))
        elif choice == "max":
            assert np.all(np.abs(ov[big]) == float(fmtsim.get_format(fmt).max_finite))
        else:
            assert np.all(np.isinf(ov[big]))


def test_typed_inputs_and_errors():
    x = np.array([1.5, -0.0, np.nan], dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
    out, _, rep = ocp_to_fnuz(x, "e4m3")
    assert out.view(ml_dtypes.float8_e4m3fnuz).astype(np.float32)[0] * 2 == 1.5
    assert rep.neg_zero == 1 and rep.nan == 1
    with pytest.raises(ValueError, match="already|expected float8_e4m3fn"):
        ocp_to_fnuz(x.astype(np.float32).astype(ml_dtypes.float8_e4m3fnuz), "e4m3")
    with pytest.raises(ValueError, match="e4m3 and e5m2"):
        ocp_to_fnuz(np.zeros(2, np.uint8), "e2m1")
    with pytest.raises(ValueError, match="not a byte"):
        ocp_to_fnuz(np.array([300]), "e4m3")
    with pytest.raises(ValueError, match="inf must be one of"):
        ocp_to_fnuz(np.zeros(2, np.uint8), "e5m2", inf="zero")


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_scale_doubling_is_exact_and_checked(dt):
    s = np.array([1.0, 3.0e-3, 0.5, np.inf], dtype=dt)
    d = scale_by_power_of_two(s, 2.0)
    assert d.dtype == np.dtype(dt)
    assert np.array_equal(d.astype(np.float64), s.astype(np.float64) * 2)
    big = np.array([np.finfo(np.float16).max if dt == np.float16 else float(ml_dtypes.finfo(dt).max)], dtype=dt)
    with pytest.raises(OverflowError, match="overflows"):
        scale_by_power_of_two(big, 2.0)
    tiny = np.array([float(ml_dtypes.finfo(dt).smallest_subnormal)], dtype=dt)
    with pytest.raises(ValueError, match="not exact"):
        scale_by_power_of_two(tiny, 0.5)
