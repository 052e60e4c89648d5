"""Stochastic rounding with caller-supplied random bits, against the oracle and by counting."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance.models import boundary_points
from fmtsim.oracle import encode_one

from .conftest import ALL_FORMATS, slow_unless

SOURCES = {np.float16: "float16", ml_dtypes.bfloat16: "bfloat16", np.float32: "float32",
           np.float64: "float64"}


@pytest.mark.parametrize("name", slow_unless(ALL_FORMATS, keep={"e4m3", "e2m1", "e8m0"}))
@pytest.mark.parametrize("dtype", slow_unless(list(SOURCES), keep={np.float32}), ids=list(SOURCES.values()))
def test_sr_equals_oracle(name, dtype, rng):
    f = fmtsim.get_format(name)
    x = boundary_points(name, dtype)
    x = x[~np.isnan(x.astype(np.float64))]
    span = float(f.max_finite)
    with np.errstate(over="ignore"):  # E8M0's 2^127 range in float16: the draws past it are +-Inf cases
        extra = (rng.uniform(-span, span, 300)).astype(dtype)
    x = np.concatenate([x, extra, x])
    r = rng.integers(0, 2**32, x.size, dtype=np.uint64).astype(np.uint32)
    r[: x.size // 8] = 0
    r[-x.size // 8:] = 0xFFFFFFFF
    for ov in ("satfinite", "nonsat"):
        got = fmtsim.encode(x, name, rounding="sr", rbits=r, overflow=ov)
        want = [encode_one(float(v), name, "sr", ov, rbits=int(b), src=SOURCES[dtype])[0]
                for v, b in zip(x.astype(np.float64), r, strict=True)]
        bad = np.nonzero(got != np.array(want, np.uint8))[0]
        assert bad.size == 0, [(float(x[i]), int(r[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("name", ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "int8"])
def test_zero_bits_truncate_and_all_ones_round_away(name, rng):
    f = fmtsim.get_format(name)
    x = rng.uniform(-float(f.max_finite), float(f.max_finite), 5000).astype(np.float32)
    zeros = np.zeros(x.size, np.uint32)
    ones = np.full(x.size, 0xFFFFFFFF, np.uint32)
    assert np.array_equal(fmtsim.encode(x, name, rounding="sr", rbits=zeros),
                          fmtsim.encode(x, name, rounding="rtz"))
    away = np.where(x > 0, fmtsim.encode(x, name, rounding="rup"), fmtsim.encode(x, name, rounding="rdn"))
    assert np.array_equal(fmtsim.encode(x, name, rounding="sr", rbits=ones), away)


def test_sr_counts_exactly():
    """float16 1 + 5/1024 into E4M3 (1.0 .. 1.125): D = 7 discarded bits, fraction 5/128.

    Of the 128 possible values of the low 7 random bits exactly 5 round up, and the
    higher random bits do not matter.
    """
    x = np.full(1024, 1 + 5 / 1024, dtype=np.float16)
    r = np.arange(1024, dtype=np.uint32) * 0x01000001  # low 7 bits cycle, high bits vary
    codes = fmtsim.encode(x, "e4m3", rounding="sr", rbits=r)
    up = codes == 0x39
    assert set(np.unique(codes)) == {0x38, 0x39}
    assert up.sum() == 5 * 8
    assert np.array_equal(up, (r % 128) >= 128 - 5)


def test_sr_subnormal_result_uses_more_bits():
    # float32 2^-8 * 1.25 into E4M3: result subnormal (spacing 2^-9): the value is
    # 2.5 subnormal steps, fraction 1/2 over D = 22 bits
    x = np.array([2.0**-8 * 1.25] * 3, dtype=np.float32)
    half = 1 << 21
    r = np.array([half - 1, half, (1 << 22) | (half - 1)], dtype=np.uint32)
    assert fmtsim.encode(x, "e4m3", rounding="sr", rbits=r).tolist() == [2, 3, 2]
