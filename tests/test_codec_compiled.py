"""The compiled element kernels (fmtsim/codec_kernels.cpp) against their numpy twins, bit for bit:
the table lookups of encode for every source type and every round-to-odd index, and the compiled
stochastic rounding against rounding.encode_f64 (which the Fraction twin holds in test_sr.py)."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim import rounding
from fmtsim.policy import Policy, resolve

from .conftest import slow_unless

POLICIES = [(None, {}), ("ml_dtypes", {}), ("torch", {}), (None, {"rounding": "rto"}), (None, {"rounding": "rnm"}),
            (None, {"overflow": "nonsat"})]
KERNEL_FORMATS = list(fmtsim.FORMATS) + ["binary8p4se", "binary8p1ue", "binary5p3sf"]


def _available():
    why = rounding._KERNELS.unavailable_reason()
    if why is not None:
        pytest.skip(f"the element kernels do not build here: {why}")


def _every_index(pol, rng):
    """One float32 per round-to-odd index (its pattern with random low bits), and each index's lower end."""
    s = rounding.table_f32(pol)[1]
    hi = np.arange(1 << (32 - s), dtype=np.uint64) << np.uint64(s)
    low = rng.integers(0, 1 << s, hi.size, dtype=np.uint64)
    return np.concatenate([hi, hi | low]).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("name", slow_unless(KERNEL_FORMATS, keep={"e4m3", "e5m2", "e2m1", "int4", "binary8p4se"}))
def test_encode_lookups_equal_numpy(name, rng):
    _available()
    f = fmtsim.get_format(name)
    x16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for profile, kw in POLICIES:
        kw = dict(kw, nan=None if f.has_nan else "zero")
        if profile is not None:
            kw["profile"] = profile
            kw.pop("nan")
        try:
            pol = resolve(f, kw.get("rounding"), kw.get("overflow"), kw.get("nan"), kw.get("profile"))
        except ValueError:
            continue  # a policy this format refuses
        for x in (_every_index(pol, rng), x16.view(np.float16), x16.view(ml_dtypes.bfloat16),
                  rng.standard_normal(50000) * float(f.max_finite)):
            p = pol.for_source({np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
                                np.dtype(ml_dtypes.bfloat16): "bfloat16", np.dtype(np.float64): "float64"}[x.dtype])
            fast = rounding.encode_fast(x, p, np.empty(x.size, np.uint8), engine="compiled")
            slow = rounding.encode_fast(x, p, np.empty(x.size, np.uint8), engine="numpy")
            assert np.array_equal(fast, slow), (name, profile, kw, x.dtype)


ARITH_FORMATS = ["e5m2", "e4m3", "e4m3fnuz", "e2m1", "e3m2", "binary8p4se", "binary8p1sf"]


def test_arithmetic_encode_serves_the_signed_float_formats():
    """fmtsim_encode_f32_rne (no table read) runs where its parameters reproduce the table, and only
    there: signed float formats with subnormals under rne, both overflow rules; not the unsigned,
    integer or E8M0 formats, nor another rounding."""
    _available()
    for name in ARITH_FORMATS:
        for overflow in ("satfinite", "nonsat"):
            assert rounding.arith_params(resolve(name, "rne", overflow)) is not None, (name, overflow)
    for name, mode in (("ue4m3", "rne"), ("e8m0", "rne"), ("int8", "rne"), ("binary8p4ue", "rne"),
                       ("e4m3", "rtz"), ("e4m3", "rna")):
        assert rounding.arith_params(resolve(name, mode)) is None, (name, mode)


@pytest.mark.parametrize("name", ARITH_FORMATS)
def test_arithmetic_encode_both_variants_equal_the_table(name, rng):
    """Both variants of the arithmetic kernel (the FPU's rounding of subnormals, and the integer one
    that runs under another FP rounding mode) give the table lookup's code at every round-to-odd
    index, with its lower end and with random low bits."""
    _available()
    for overflow in ("satfinite", "nonsat"):
        pol = resolve(name, "rne", overflow).for_source("float32")
        params = rounding.arith_params(pol)
        table, s = rounding.table_f32(pol)
        x = _every_index(pol, rng).view(np.uint32)
        want = np.empty(x.size, np.uint8)
        rounding._KERNELS.entry()["f32"](x.size, x.ctypes.data, table.ctypes.data, s, want.ctypes.data)
        for integer_subnormals in (0, 1):
            got = np.empty(x.size, np.uint8)
            rounding._KERNELS.entry()["rne"](x.size, x.ctypes.data, params.ctypes.data, integer_subnormals,
                                             got.ctypes.data)
            assert np.array_equal(got, want), (name, overflow, integer_subnormals)


def test_arithmetic_encode_under_another_fp_rounding_mode(rng):
    """A caller that changed the FP environment's rounding mode (fesetround) gets the same codes: the
    kernel reads the mode on every call and runs its integer variant then."""
    _available()
    import ctypes
    import ctypes.util
    import platform

    name = ctypes.util.find_library("m")
    libm = ctypes.CDLL(name) if name else None
    if libm is None or not hasattr(libm, "fesetround") or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs the C library's fesetround and x86's FE_* values")
    x = (rng.standard_normal(100_000) * 2.0**-14).astype(np.float32)  # mostly E5M2 subnormals
    want = fmtsim.encode(x, "e5m2")
    for mode in (0x400, 0x800, 0xC00):  # FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO on x86
        assert libm.fesetround(mode) == 0
        try:
            got = fmtsim.encode(x, "e5m2")
        finally:
            libm.fesetround(0)
        assert np.array_equal(got, want), hex(mode)


SR_FORMATS = ["e4m3", "e5m2", "e2m1", "e3m2", "ue4m3", "int4", "mxint8", "uint4", "e4m3fnuz", "binary8p4se",
              "binary8p3ue", "e3m4"]


@pytest.mark.parametrize("name", slow_unless(SR_FORMATS, keep={"e4m3", "e2m1", "uint4", "binary8p3ue"}))
def test_compiled_stochastic_rounding_equals_numpy(name, rng):
    _available()
    f = fmtsim.get_format(name)
    vals = f.values[np.isfinite(f.values)]
    x = np.concatenate([rng.standard_normal(6000) * float(f.max_finite) / 2, vals, vals * 1.001, -vals * 0.999,
                        rng.random(2000) * float(f.min_positive) * 4, [0.0, -0.0, np.inf, -np.inf, np.nan,
                                                                       float(f.max_finite) * 1.1, 1e-45, -1e-45]])
    x = x.astype(np.float32)
    for rule in ("truncated", "offset", "nearest", "equal"):
        for bits in (None, 1, 9, 32):
            for overflow in ("satfinite", "nonsat"):
                pol = resolve(f, profile=Policy(rounding="sr", overflow=overflow, sr_rule=rule, sr_bits=bits,
                                                nan=None if f.has_nan else "zero")).for_source("float32")
                assert rounding.sr_compiled(pol, "float32")
                for dtype in (np.uint32, np.uint64):
                    r = rng.integers(0, 1 << (bits or 32), x.size, dtype=np.uint64).astype(dtype)
                    out = np.empty(x.size, np.uint8)
                    rounding.encode_sr_f32(x, pol, r, out)
                    want = rounding.encode_f64(x.astype(np.float64), pol, rbits=r, src="float32")[0]
                    assert np.array_equal(out, want), (name, rule, bits, overflow, dtype)


def test_encode_falls_back_to_numpy_without_a_compiler(monkeypatch, rng, tmp_path):
    x = (rng.standard_normal(5000) * 100).astype(np.float32)
    r = rng.integers(0, 1 << 32, x.size, dtype=np.uint64).astype(np.uint32)
    want, want_sr = fmtsim.encode(x, "e4m3"), fmtsim.encode(x, "e4m3", rounding="sr", rbits=r)
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "cache"))
    rounding._KERNELS.forget()
    try:
        assert rounding._KERNELS.unavailable_reason() is not None
        with pytest.warns(RuntimeWarning, match="element encode and decode kernels.*runs the numpy path instead"):
            assert np.array_equal(fmtsim.encode(x, "e4m3"), want)  # said once, then quiet
        assert np.array_equal(fmtsim.encode(x, "e4m3", rounding="sr", rbits=r), want_sr)
        with pytest.raises(ValueError, match="engine='compiled' is unavailable"):
            rounding.encode_fast(x, resolve("e4m3"), np.empty(x.size, np.uint8), engine="compiled")
    finally:
        rounding._KERNELS.forget()


@pytest.mark.parametrize("name", slow_unless(KERNEL_FORMATS, keep={"e4m3", "e2m1", "e8m0", "ue4m3", "binary8p4se"}))
def test_decode_lookup_equals_numpy(name, rng):
    _available()
    f = fmtsim.get_format(name)
    codes = np.concatenate([np.arange(f.n_codes), rng.integers(0, f.n_codes, 10007)]).astype(np.uint8)
    want = np.take(f.values.astype(np.float32), codes)  # the numpy twin: one lookup per code
    got = fmtsim.decode(codes, f)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # NaN signs and -0 included
