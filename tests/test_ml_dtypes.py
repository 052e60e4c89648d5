"""fmtsim's ml_dtypes profile against ml_dtypes itself, bit for bit.

Known differences (conformance/impls/ml_dtypes.py) are asserted by name: each
must occur where predicted and nowhere else.
"""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance.divergences import explain
from fmtsim.conformance.models import boundary_points

from .conftest import ML_DTYPES_FLOATS


def check_against_ml_dtypes(x, name, source, expect_divergences=()):
    f = fmtsim.get_format(name)
    ours = fmtsim.encode(x, name, profile="ml_dtypes")
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = x.astype(f.ml_dtype).view(np.uint8)
    diff = ours != theirs
    known = explain("ml_dtypes", name, source, x)
    covered = np.zeros_like(diff)
    for mask in known.values():
        covered |= mask
    unexplained = np.nonzero(diff & ~covered)[0]
    assert unexplained.size == 0, [(x[i], hex(ours[i]), hex(theirs[i])) for i in unexplained[:5]]
    # every named divergence that applies must really happen where predicted
    for div, mask in known.items():
        assert np.array_equal(diff[mask], np.ones(int(mask.sum()), bool)), div
    for div in expect_divergences:
        assert known[div].any(), f"{div} expected to show up in this input set"
    return diff.sum()


@pytest.mark.parametrize("name", ML_DTYPES_FLOATS)
@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16], ids=["f16", "bf16"])
def test_every_16bit_pattern(name, dt):
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt)
    src = "float16" if dt == np.float16 else "bfloat16"
    expect = ("ml_dtypes.e8m0_subnormal_ties_up",) if (name == "e8m0" and src == "bfloat16") else ()
    check_against_ml_dtypes(x, name, src, expect)


@pytest.mark.parametrize("name", ML_DTYPES_FLOATS)
def test_float32_random_and_boundaries(name, rng):
    rand = rng.integers(0, 2**32, size=1 << 22, dtype=np.uint64).astype(np.uint32)
    bnd = boundary_points(name, np.float32).view(np.uint32)
    x = np.concatenate([rand, bnd, np.arange(0, 1 << 23, 97, dtype=np.uint32)]).view(np.float32)
    expect = ("ml_dtypes.e8m0_subnormal_ties_up",) if name == "e8m0" else ()
    check_against_ml_dtypes(x, name, "float32", expect)


@pytest.mark.parametrize("name", ML_DTYPES_FLOATS)
def test_float64_arrays_round_twice_in_ml_dtypes(name, rng):
    f = fmtsim.get_format(name)
    mids = boundary_points(name, np.float64)
    # float64 values just off a midpoint, closer than a float32 ulp: float32 rounds them onto it
    fin = mids[np.isfinite(mids) & (mids != 0)]
    near = np.concatenate([fin * (1 + 2.0**-40), fin * (1 - 2.0**-40)])
    x = np.concatenate([near, rng.standard_normal(10000) * float(f.max_finite) / 3])
    check_against_ml_dtypes(x, name, "float64", ("ml_dtypes.float64_double_rounding",))


def test_float64_scalar_constructor_rounds_once():
    x = 1.0625 + 2.0**-40
    assert float(ml_dtypes.float8_e4m3fn(x)) == 1.125
    assert fmtsim.decode(fmtsim.encode(x, "e4m3"), "e4m3") == 1.125
    assert float(np.array([x]).astype(ml_dtypes.float8_e4m3fn)[0]) == 1.0


@pytest.mark.parametrize("name", ML_DTYPES_FLOATS)
def test_decode_every_code_bit_identical(name):
    f = fmtsim.get_format(name)
    c = np.arange(f.n_codes, dtype=np.uint8)
    for dt in (np.float32, np.float64):
        ref = c.view(f.ml_dtype).astype(dt)
        ours = fmtsim.decode(c, name, dt)
        assert np.array_equal(ref.view(np.uint8), ours.view(np.uint8))


@pytest.mark.parametrize("name", [n for n, f in fmtsim.FORMATS.items()
                                  if f.kind == "int" and f.ml_dtype is not None and f.bits < 8])
def test_narrow_integers_truncate_like_ml_dtypes_inside_the_range(name):
    # ml_dtypes 0.6 casts float -> int2/uint2/int4/uint4 by truncation, wrapping out-of-range values modulo 2^bits
    # (fmtsim saturates: there is no wrapping policy), so the comparison keeps to inputs whose truncation fits
    f = fmtsim.get_format(name)
    for dt in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64):
        x = boundary_points(name, dt)
        wide = x.astype(np.float64)
        x = x[np.isfinite(wide) & (wide > float(f.min_finite) - 1) & (wide < float(f.max_finite) + 1)]
        theirs = x.astype(f.ml_dtype).view(np.uint8) & (f.n_codes - 1)
        assert np.array_equal(fmtsim.encode(x, name, rounding="rtz"), theirs), (name, dt)
