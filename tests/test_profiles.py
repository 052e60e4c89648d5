"""Each profile against the implementation it names, where that is installed."""

import math

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance.divergences import explain
from fmtsim.conformance.models import boundary_points

from .conftest import slow_unless


def _inputs(fmt, rng):
    x = boundary_points(fmt, np.float32)
    f = fmtsim.get_format(fmt)
    with np.errstate(over="ignore"):  # E8M0's 2^127 scale: draws past float32's range are +-Inf cases
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


def test_torch_profiles_state_what_torch_213_and_torchao_018_do():
    # read off torch 2.13.0 / torchao 0.18.0 on the CPU (test_torch_peers checks them in bulk)
    f32 = np.float32
    assert fmtsim.encode(f32(464.0), "e4m3", profile="torch") == 0x7E  # the tie rounds to 448
    assert fmtsim.encode(f32(1e9), "e4m3", profile="torch") == 0x7E  # saturates...
    assert fmtsim.encode(f32(np.inf), "e4m3", profile="torch") == 0x7E  # ...Inf too
    assert fmtsim.encode(f32(-np.nan), "e4m3", profile="torch") == 0xFF
    assert fmtsim.encode(f32(61440.0), "e5m2", profile="torch") == 0x7C  # E5M2 does not saturate
    assert fmtsim.encode(f32(np.nan), "e5m2", profile="torch") == 0x7F
    assert fmtsim.encode(f32(-np.nan), "e5m2", profile="torch") == 0xFF
    assert fmtsim.encode(f32(248.0), "e4m3fnuz", profile="torch") == 0x80  # tie to 256: overflow, NaN
    assert fmtsim.encode(f32(3.0), "e8m0", profile="torch") == 0x81  # E8M0 ties up
    assert fmtsim.encode(f32(np.nan), "e2m1", profile="torchao") == 0x3  # torchao: NaN as 1.5
    assert fmtsim.encode(f32(-np.nan), "e3m2", profile="torchao") == 0x2E
    assert fmtsim.encode(np.array([0x7F800001], np.uint32).view(f32), "e2m1", profile="torchao")[0] == 0x2
    assert fmtsim.encode(f32(7.0), "e2m3", profile="torchao") == 0x1E


def test_te_profile_matches_the_te_reference_fp4_intervals(rng):
    """TransformerEngine's reference cast (custom_recipes/reference_nvfp4.py cast_to_fp4x2)
    assigns E2M1 codes by intervals, closed where RNE sends the tie down:
    [0, .25] 0, (.25, .75) 1, [.75, 1.25] 2, (1.25, 1.75) 3, [1.75, 2.5] 4, (2.5, 3.5) 5,
    [3.5, 5] 6, above 5: 7; the negative side mirrors them with [-.25, 0) -> 8, so -0.0
    (equal to 0) gets 0, and NaN (in no interval) keeps the initial 0."""
    closed = [(0.0, 0.25), (0.75, 1.25), (1.75, 2.5), (3.5, 5.0)]  # even codes 0, 2, 4, 6
    opened = [(0.25, 0.75), (1.25, 1.75), (2.5, 3.5)]  # odd codes 1, 3, 5
    pts = np.concatenate([boundary_points("e2m1", np.float32),
                          rng.uniform(-8, 8, 5000).astype(np.float32),
                          np.array([-0.0, 0.0, -1e-30, 1e-30, np.nan, -np.nan], np.float32)])
    want = np.zeros(pts.shape, np.uint8)
    for sign, mag in ((0, pts), (8, -pts)):
        for i, (lo, hi) in enumerate(closed):
            want[(mag >= lo) & (mag <= hi) & (mag != 0 if sign else True)] = sign + 2 * i
        for i, (lo, hi) in enumerate(opened):
            want[(mag > lo) & (mag < hi)] = sign + 2 * i + 1
        want[mag > 5.0] = sign + 7
    want[(pts == 0)] = 0  # -0.0 compares equal to 0: the [0, 0.25] interval
    want[np.isnan(pts)] = 0
    assert np.array_equal(fmtsim.encode(pts, "e2m1", profile="te"), want)


@pytest.mark.parametrize("profile", slow_unless(["torch", "torchao", "te"], keep={"torch"}))
def test_new_profiles_fast_path_equals_oracle(profile):
    from fmtsim.conformance.run import run

    from .conftest import SAME_PATH_AS, full_run

    # seconds per format: the formats that repeat an older one's code path wait for the full tier
    formats = None if full_run() else [n for n in fmtsim.FORMATS if n not in SAME_PATH_AS]
    rows = run(("fmtsim",), formats=formats, big=False, profile=profile)
    assert rows and all(r.failed == 0 for r in rows), [(r.fmt, r.model, r.examples) for r in rows if r.failed]
