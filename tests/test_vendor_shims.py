"""NVIDIA's and AMD's own conversion functions (compiled into shims against the machine's
headers) against fmtsim's ``cuda``, ``ptx`` and ``hip`` profiles, bit for bit."""

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance import shim_build
from fmtsim.conformance.divergences import explain
from fmtsim.conformance.impls import cuda, hip
from fmtsim.conformance.models import boundary_points

from .conftest import slow_unless

_CUDA_MISSING = cuda.missing()
_HIP_MISSING = hip.missing()
needs_cuda = pytest.mark.skipif(_CUDA_MISSING is not None, reason=str(_CUDA_MISSING))
needs_hip = pytest.mark.skipif(_HIP_MISSING is not None, reason=str(_HIP_MISSING))
DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
CUDA_ENTRIES = list(cuda.entry_points())


def _nan_payloads(dtype):
    """NaNs of several payloads, both signs, in ``dtype``."""
    width = np.dtype(dtype).itemsize * 8
    man = {16: 7 if dtype == ml_dtypes.bfloat16 else 10, 32: 23, 64: 52}[width]
    ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    ones = ((1 << (width - 1 - man)) - 1) << man
    pats = [s | ones | p for s in (0, 1 << (width - 1)) for p in (1, 1 << (man - 1), 1 << (man - 2), (1 << man) - 1)]
    return np.array(pats, dtype=ut).view(dtype)


@needs_cuda
@pytest.mark.parametrize(("fmt", "ov", "rm", "src"), slow_unless(
    CUDA_ENTRIES, keep={e for e in CUDA_ENTRIES if e[3] == "float32"}), ids=["-".join(e) for e in CUDA_ENTRIES])
def test_cuda_profile_equals_nvidia_on_boundaries(fmt, ov, rm, src):
    dt = DTYPES[src]
    x = np.concatenate([boundary_points(fmt, dt), _nan_payloads(dt)])
    theirs = cuda.vendor_encode(x, fmt, ov, rm)
    ours = fmtsim.encode(x, fmt, profile="cuda", overflow=ov, rounding=rm)
    bad = np.nonzero(theirs != ours)[0]
    assert bad.size == 0, [(repr(x[i]), hex(theirs[i]), hex(ours[i])) for i in bad[:5]]


@needs_cuda
def test_ptx_e8m0_is_nvidia_satfinite():
    # the example: cvt.rp.satfinite.ue8m0x2.f32 is what __nv_cvt_float_to_e8m0 runs on sm_100
    x = np.float32([0, -3, np.inf])
    assert cuda.vendor_encode(x, "e8m0", "satfinite", "rup").tolist() == [0x00, 0x81, 0xFE]
    assert fmtsim.encode(x, "e8m0", profile="ptx").tolist() == [0x00, 0x81, 0xFE]
    pts = boundary_points("e8m0", np.float32)
    for rm in ("rup", "rtz"):
        assert np.array_equal(fmtsim.encode(pts, "e8m0", profile="ptx", rounding=rm),
                              cuda.vendor_encode(pts, "e8m0", "satfinite", rm))
    for fmt in ("e4m3", "e5m2", "e2m1", "e2m3", "e3m2"):  # PTX is satfinite: cuda == ptx there
        pts = boundary_points(fmt, np.float32)
        assert np.array_equal(fmtsim.encode(pts, fmt, profile="ptx"), fmtsim.encode(pts, fmt, profile="cuda"))


@needs_cuda
def test_cuda_nosat_examples():
    # __NV_NOSAT: overflow keeps the sign (-465 -> 0xFF) while any NaN input is 0x7F
    x = np.float32([-465, np.nan, -np.nan, np.inf, -np.inf])
    assert cuda.vendor_encode(x, "e4m3", "nonsat").tolist() == [0xFF, 0x7F, 0x7F, 0x7F, 0xFF]
    assert fmtsim.encode(x, "e4m3", profile="cuda", overflow="nonsat").tolist() == [0xFF, 0x7F, 0x7F, 0x7F, 0xFF]


@needs_cuda
@pytest.mark.parametrize("fmt", list(cuda.ENTRY_POINTS))
def test_cuda_decodes(fmt):
    theirs = cuda.vendor_decode(fmt)
    dt = ml_dtypes.bfloat16 if fmt == "e8m0" else np.float16
    ours = fmtsim.decode(np.arange(theirs.size), fmt, dt).view(np.uint16)
    nan = np.isnan(theirs.view(dt).astype(np.float32))
    assert np.array_equal(nan, np.isnan(ours.view(dt).astype(np.float32)))
    assert np.array_equal(theirs[~nan], ours[~nan])


@needs_cuda
@pytest.mark.slow
def test_conform_cuda_every_model():
    from fmtsim.conformance.run import run

    rows = run(("cuda",), big=True)
    assert rows and all(r.failed == 0 for r in rows), [(r.fmt, r.model, r.examples) for r in rows if r.failed]


@needs_hip
@pytest.mark.parametrize("fmt", list(hip.FORMATS))
@pytest.mark.parametrize("src", slow_unless(list(DTYPES), keep={"float32"}))
def test_hip_profile_equals_amd(fmt, src):
    dt = DTYPES[src]
    x = np.concatenate([boundary_points(fmt, dt), _nan_payloads(dt)])
    for ov in hip.OVERFLOWS:
        theirs = hip.vendor_encode(x, fmt, ov)
        ours = fmtsim.encode(x, fmt, profile="hip", overflow=ov)
        known = explain("hip", fmt, src, x)["hip.shift_of_64_or_more"]
        bad = np.nonzero((theirs != ours) & ~known)[0]
        assert bad.size == 0, [(ov, repr(x[i]), hex(theirs[i]), hex(ours[i])) for i in bad[:5]]


@needs_hip
@pytest.mark.parametrize("fmt", list(hip.FORMATS))
def test_hip_decodes(fmt):
    theirs = hip.vendor_decode(fmt)
    ours = fmtsim.decode(np.arange(256), fmt, np.float32).view(np.uint32)
    nan = np.isnan(theirs.view(np.float32))
    assert np.array_equal(nan, np.isnan(ours.view(np.float32)))
    assert np.array_equal(theirs[~nan], ours[~nan])


@needs_hip
def test_hip_examples_and_divergence():
    # overflow is tested before rounding: 449 rounds to 448 (OCP) but AMD gives NaN without saturation
    x = np.float32([449, -449, np.inf, np.nan, -np.nan])
    assert hip.vendor_encode(x, "e4m3", "nonsat").tolist() == [0x7F, 0xFF, 0x7F, 0x7F, 0xFF]
    assert fmtsim.encode(x, "e4m3", profile="hip", overflow="nonsat").tolist() == [0x7F, 0xFF, 0x7F, 0x7F, 0xFF]
    # FNUZ under saturation: NaN and Inf alike become +-max
    assert hip.vendor_encode(x, "e4m3fnuz", "satfinite").tolist() == [0x7F, 0xFF, 0x7F, 0x7F, 0xFF]
    # the undefined 64-bit shift: float 5.3e-23 gives E4M3 0x01 on x86; exact is 0x00; named, not a profile
    tiny = np.float32([5.3e-23])
    assert fmtsim.encode(tiny, "e4m3", profile="hip").tolist() == [0x00]
    assert explain("hip", "e4m3", "float32", tiny)["hip.shift_of_64_or_more"].tolist() == [True]
    assert not explain("hip", "e4m3", "float32", np.float32([2.0**-49]))["hip.shift_of_64_or_more"].any()


def test_shim_build_names_a_missing_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path))
    with pytest.raises(shim_build.ShimUnavailable, match="no C\\+\\+ compiler"):
        shim_build.build("cuda_shim", [tmp_path], [], what="cuda")


def test_hip_missing_headers_say_where_to_look(monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.setenv("HIP_PATH", str(tmp_path))
    inc, _ = hip.find_include_dir()
    if inc is not None:  # /opt/rocm exists here
        pytest.skip(f"a ROCm install is present at {inc}")
    hip._lib.cache_clear()
    try:
        assert "ROCM_PATH" in str(hip.missing())
    finally:
        hip._lib.cache_clear()
