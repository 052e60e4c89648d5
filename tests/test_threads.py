"""encode / decode / encode_with_flags / quantize split across threads (``threads=N``): the same codes,
values and flags as one thread, for every kind of path (the compiled kernels, stochastic rounding, NaN
payloads re-read, an intermediate type, the numpy lookups), and clear errors for a bad ``threads``."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim import codec


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(codec, "_MIN_PART", 1000)  # several ranges on a small array


def _inputs(rng, n=20_011):
    x = (rng.standard_normal(n) * 300).astype(np.float32)
    x[::97] = np.nan
    x[1::89] = np.uint32(0xFFC01234).view(np.float32)  # a negative NaN with a payload
    x[2::83] = np.inf
    return x


@pytest.mark.parametrize("threads", [2, 3, 7])
def test_encode_split_equals_one_thread(small_parts, rng, threads):
    x = _inputs(rng)
    r = rng.integers(0, 1 << 32, x.size, dtype=np.uint64).astype(np.uint32)
    cases = [("e5m2", {}), ("e4m3", {"rounding": "rtz"}), ("e4m3", {"rounding": "sr", "rbits": r}),
             ("e5m2", {"profile": "torch"}), ("e4m3", {"profile": "cuda"}), ("int4", {"nan": "zero"}),
             ("e2m1", {"profile": "ptx"}), ("binary8p4se", {})]
    for fmt, kw in cases:
        for src in (x, x.astype(np.float64), x.astype(ml_dtypes.bfloat16)):
            one = fmtsim.encode(src, fmt, **kw)
            assert np.array_equal(fmtsim.encode(src, fmt, threads=threads, **kw), one), (fmt, kw, src.dtype)
    codes, flags = fmtsim.encode_with_flags(x, "e4m3")
    c2, f2 = fmtsim.encode_with_flags(x, "e4m3", threads=threads)
    assert np.array_equal(codes, c2) and np.array_equal(flags, f2)


@pytest.mark.parametrize("threads", [2, 5])
def test_decode_split_equals_one_thread(small_parts, rng, threads):
    codes = rng.integers(0, 256, 30_001, dtype=np.uint8)
    for fmt, dtype in (("e4m3", np.float32), ("e5m2", np.float64), ("e8m0", np.float32), ("e2m1", np.float16)):
        c = codes & (fmtsim.get_format(fmt).n_codes - 1)
        one = fmtsim.decode(c, fmt, dtype).view(np.uint8)
        assert np.array_equal(fmtsim.decode(c, fmt, dtype, threads=threads).view(np.uint8), one), fmt
    x = _inputs(rng)
    assert np.array_equal(fmtsim.quantize(x, "e4m3", threads=threads).view(np.uint32),
                          fmtsim.quantize(x, "e4m3").view(np.uint32))


def test_threads_at_the_default_part_size(rng):
    """Without the fixture: an array large enough for two ranges of the real minimum."""
    x = (rng.standard_normal(2 * codec._MIN_PART + 12_345) * 10).astype(np.float32)
    assert np.array_equal(fmtsim.encode(x, "e4m3", threads=2), fmtsim.encode(x, "e4m3"))


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError),
                                        ("4", TypeError)])
def test_bad_threads_is_refused(bad, error):
    with pytest.raises(error, match="threads must"):
        fmtsim.encode(np.ones(3, np.float32), "e4m3", threads=bad)
    with pytest.raises(error, match="threads must"):
        fmtsim.decode(np.ones(3, np.uint8), "e4m3", threads=bad)
