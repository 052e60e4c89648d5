"""Each profile against the implementation it names, where that is installed."""

import math

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance.divergences import explain
from fmtsim.conformance.models import boundary_points


def _inputs(fmt, rng):
    x = boundary_points(fmt, np.float32)
    f = fmtsim.get_format(fmt)
    r = (rng.standard_normal(4000) * float(f.max_finite) / 2).astype(np.float32)
    return np.concatenate([x, r])


@pytest.mark.parametrize("fmt,onnx_type", [("e4m3", "FLOAT8E4M3FN"), ("e5m2", "FLOAT8E5M2"),
                                           ("e4m3fnuz", "FLOAT8E4M3FNUZ"), ("e5m2fnuz", "FLOAT8E5M2FNUZ"),
                                           ("e2m1", "FLOAT4E2M1"), ("e8m0", "FLOAT8E8M0")])
@pytest.mark.parametrize("saturate", [True, False])
def test_onnx_profiles_match_the_onnx_reference_cast(fmt, onnx_type, saturate, rng):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed (pip install onnx to run this)")
    from onnx.reference.ops.op_cast import cast_to

    to = getattr(onnx.TensorProto, onnx_type, None)
    if to is None:
        pytest.skip(f"this onnx has no {onnx_type}")
    x = _inputs(fmt, rng)
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = np.asarray(cast_to(x, to, saturate, "up")).view(np.uint8)
    ours = fmtsim.encode(x, fmt, profile="onnx_sat" if saturate else "onnx_nosat")
    diff = ours != theirs
    known = np.zeros_like(diff)
    for mask in explain("onnx", fmt, "float32", x).values():
        known |= mask
    assert not np.any(diff & ~known), [(x[i], hex(ours[i]), hex(theirs[i])) for i in np.nonzero(diff & ~known)[0][:5]]
    if fmt == "e8m0":  # the named divergence's headline cases really occur
        heads = np.array([0.0, -3.0, 2.0**-127], np.float32)
        with np.errstate(invalid="ignore"):
            got = np.asarray(cast_to(heads, to, saturate, "up")).view(np.uint8).tolist()
        assert got == [0x00, 0x81, 0x01]
        assert fmtsim.encode(heads, fmt, profile="onnx_sat").tolist() == [0xFF, 0xFF, 0x00]


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "e8m0", "e2m1", "e3m2", "e2m3"])
def test_gfloat_profile_matches_gfloat(fmt, rng):
    gf = pytest.importorskip("gfloat", reason="gfloat is not installed (pip install gfloat to run this)")
    from gfloat import formats as gff

    info = getattr(gff, f"format_info_ocp_{fmt}")
    x = _inputs(fmt, rng)[::3]
    named = explain("gfloat", fmt, "float32", x)
    known = named.get("gfloat.overflow_raises", np.zeros(x.size, bool))
    underflow = named.get("gfloat.e8m0_underflow_nan", np.zeros(x.size, bool))
    f = fmtsim.get_format(fmt)
    for i, v in enumerate(x.astype(np.float64)):
        if math.isnan(v) and not f.has_nan:
            with pytest.raises(ValueError):
                fmtsim.encode(v, fmt, profile="gfloat")
            continue
        try:
            theirs = gf.encode_float(info, gf.round_float(info, float(v)))
        except ValueError:
            assert known[i], v
            continue
        ours = int(fmtsim.encode(np.float32(v), fmt, profile="gfloat"))
        if underflow[i]:
            assert (ours, theirs) == (0x00, 0xFF), v
            continue
        assert ours == theirs, (v, hex(ours), hex(theirs))


def test_microxcaling_profile_rounds_ties_away():
    assert fmtsim.encode(np.float32(5.0), "e2m1", profile="microxcaling") == 0x7  # 6, not 4
    assert fmtsim.encode(np.float32(0.25), "e2m1", profile="microxcaling") == 0x1
    assert fmtsim.encode(np.float32(1e9), "e4m3", profile="microxcaling") == 0x7E


def test_every_profile_resolves_for_every_format():
    for p in fmtsim.PROFILES:
        for name in fmtsim.FORMATS:
            pol = fmtsim.policy.resolve(name, profile=p)
            assert pol.rounding in fmtsim.ROUNDING_MODES


def test_ml_dtypes_profile_is_ml_dtypes():
    x = boundary_points("e4m3", np.float32)
    assert np.array_equal(fmtsim.encode(x, "e4m3", profile="ml_dtypes"),
                          x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
