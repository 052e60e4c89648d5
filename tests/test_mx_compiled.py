"""The compiled MX quantizer (fmtsim/mx_blocks.cpp) against mx.quantize's numpy passes, bit for
bit: every scheme, scale rule and deterministic rounding, flushing or not, block lengths with
and without a compiled specialisation, float16/bfloat16/float32 input, every float32 amax
exponent with the mantissas where the rules turn, NaN/Inf/zero blocks, underflow, and the
engine argument, and the builds that cannot happen. The other MX tests hold mx.quantize's
default engine (the kernel, where it builds) to the exact oracle, the spec's numbers and
torchao; this file holds the numpy passes to it."""

import io
import sys

import ml_dtypes
import numpy as np
import pytest

from fmtsim import mx
from fmtsim.conformance.shim_build import find_compiler
from fmtsim.formats import get_format
from fmtsim.policy import ROUNDING_MODES

from .conftest import slow_unless

why = mx._LIBRARY.unavailable_reason()
pytestmark = pytest.mark.skipif(why is not None, reason=f"the compiled MX quantizer is unavailable: {why}")

DETERMINISTIC = [r for r in ROUNDING_MODES if r != "sr"]


def same(x, scheme, **kw):
    """mx.quantize on both engines gives the same codes and scales; returns the compiled one."""
    want = mx.quantize(x, scheme, engine="numpy", **kw)
    got = mx.quantize(x, scheme, engine="compiled", **kw)
    assert got.codes.dtype == want.codes.dtype and got.scales.dtype == want.scales.dtype
    bad = np.nonzero(got.codes != want.codes)
    assert bad[0].size == 0, (scheme, kw, "codes differ at", [b[:5] for b in bad])
    bad = np.nonzero(got.scales != want.scales)
    assert bad[0].size == 0, (scheme, kw, "scales differ at", [b[:5] for b in bad])
    assert (got.shape, got.axis, got.length, got.block_size) == (want.shape, want.axis, want.length, want.block_size)
    return got


def wide(rng, shape, lo=-140, hi=130):
    """float32 values over (almost) every exponent, per block of 32 a different range, with
    zeros, negative zeros, subnormals and the largest finite values among them."""
    n = int(np.prod(shape))
    e = rng.integers(lo, hi, n // 32 + 1).repeat(32)[:n] + rng.integers(-12, 1, n)
    with np.errstate(over="ignore"):
        v = (rng.standard_normal(n) * np.exp2(e.astype(np.float64))).astype(np.float32)
    v = np.where(np.isfinite(v), v, np.float32(3.0e38))
    special = rng.random(n)
    v = np.where(special < 0.02, np.float32(0.0), v)
    v = np.where((special >= 0.02) & (special < 0.03), np.float32(-0.0), v)
    sub = (rng.integers(1, 1 << 23, n).astype(np.uint32) | (rng.integers(0, 2, n).astype(np.uint32) << 31))
    v = np.where((special >= 0.03) & (special < 0.05), sub.view(np.float32), v)
    return v.reshape(shape)


@pytest.mark.parametrize("scheme", list(mx.SCHEMES))
@pytest.mark.parametrize("rule", mx.SCALE_RULES)
def test_every_scheme_and_rule(scheme, rule, rng):
    x = wide(rng, (64, 256))
    for flush in (False, True):
        same(x, scheme, scale_rule=rule, flush_subnormals=flush)


@pytest.mark.parametrize("rounding", DETERMINISTIC)
@pytest.mark.parametrize("scheme", slow_unless(list(mx.SCHEMES), ["mxfp8_e4m3", "mxfp4", "mxint8"]))
def test_every_rounding(scheme, rounding, rng):
    same(wide(rng, (32, 128)), scheme, rounding=rounding, scale_rule="even")


@pytest.mark.parametrize("block", [1, 2, 16, 32, 48, 300])
def test_block_lengths(block, rng):
    """16 and 32 have compiled specialisations; the others take the run-time length (300: more
    than one chunk of indices per block)."""
    x = wide(rng, (12, block * 3))
    same(x, "mxfp8_e4m3", block_size=block)
    same(x, "mxfp6_e2m3", block_size=block, scale_rule="rceil", flush_subnormals=True)


def test_every_amax_exponent_and_turning_mantissa():
    """A block whose largest magnitude is each float32 exponent field (0 .. 255) with the
    mantissas where the rules turn (0, 1, half-way for every element width, all ones), beside
    smaller elements: every scale code, clamp and NaN the rules give."""
    mans = {0, 1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFF}
    for m in range(1, 8):  # 'even' turns where the mantissa rounds up at m bits
        half = 1 << (23 - m - 1)
        mans |= {(1 << 23) - half - 1, (1 << 23) - half, (1 << 23) - half + 1}
    bits = np.array([(e << 23) | m for e in range(256) for m in sorted(mans)], np.uint32)
    amax = bits.view(np.float32)
    rng = np.random.default_rng(5)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        rest = (amax[:, None] * rng.uniform(-1, 1, (amax.size, 31)).astype(np.float32)).astype(np.float32)
    rest = np.where(np.isfinite(rest), rest, np.float32(1.0))
    signed = np.where(rng.random(amax.size) < 0.5, -amax, amax)
    x = np.concatenate([rest[:, :7], signed[:, None], rest[:, 7:]], axis=1)
    for scheme in mx.SCHEMES:
        for rule in mx.SCALE_RULES:
            q = same(x, scheme, scale_rule=rule)
            assert np.array_equal(q.scales.reshape(-1), mx.scale_codes(amax, SCHEMES_FMT[scheme], rule))


SCHEMES_FMT = {k: get_format(v) for k, v in mx.SCHEMES.items()}


def test_specials_nan_inf_zero_and_underflow():
    x = np.zeros((8, 32), np.float32)
    x[1, 5] = np.nan
    x[2, 0] = np.inf
    x[3, 31] = -np.inf
    x[4] = -0.0
    x[5, :] = np.float32(2.0**-149)  # every element the smallest subnormal
    x[6, 0], x[6, 1:] = np.float32(3.0e38), np.float32(-1e-38)  # the small ones underflow to signed zero
    x[7, 0], x[7, 1] = np.float32(1e-45), np.float32(-1e-45)
    for scheme in mx.SCHEMES:
        for rounding in DETERMINISTIC:
            for flush in (False, True):
                q = same(x, scheme, rounding=rounding, flush_subnormals=flush)
                assert q.scales[1] == q.scales[2] == q.scales[3] == mx.E8M0_NAN
                assert (q.codes[1:4] == 0).all()


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_half_inputs(dtype, rng):
    x = wide(rng, (16, 64), lo=-30, hi=14).astype(dtype)
    for scheme in ("mxfp8_e5m2", "mxfp4"):
        same(x, scheme, scale_rule="rceil")


def test_axis_and_padding(rng):
    x = wide(rng, (70, 40))
    same(x, "mxfp8_e4m3", axis=0, pad=True)
    same(x, "mxint8", axis=1, block_size=32, pad=True)


def test_large_array(rng):
    """Many blocks in one call (the engines' chunking differs)."""
    same(wide(rng, (1024, 1024)), "mxfp8_e4m3")


def test_engine_argument(monkeypatch, rng):
    x = wide(rng, (2, 32))
    with pytest.raises(ValueError, match="engine must be one of auto, compiled, numpy, got 'fast'"):
        mx.quantize(x, engine="fast")
    with pytest.raises(ValueError, match="engine='compiled' takes float16, bfloat16 or float32 input.*float64"):
        mx.quantize(x.astype(np.float64), engine="compiled")
    with pytest.raises(ValueError, match="engine='compiled' takes .*rounding 'sr'"):
        mx.quantize(x, rounding="sr", rbits=np.zeros(x.shape, np.uint32), engine="compiled")
    # auto takes the numpy path where the kernel does not apply, with the numpy path's bits
    auto = mx.quantize(x.astype(np.float64), "mxfp4")
    assert np.array_equal(auto.codes, mx.quantize(x.astype(np.float64), "mxfp4", engine="numpy").codes)
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    mx._LIBRARY.forget()
    try:
        with pytest.raises(ValueError, match="engine='compiled' is unavailable: .*no C\\+\\+ compiler"):
            mx.quantize(x, engine="compiled")
        with pytest.warns(RuntimeWarning, match="runs the numpy path instead"):  # said once, then quiet
            fallback = mx.quantize(x)  # auto: numpy, same bits
        assert np.array_equal(fallback.codes, mx.quantize(x, engine="numpy").codes)
    finally:
        mx._LIBRARY.forget()


_SILENT_COMPILER = "#!/bin/sh\nexit 3\n"
# "succeeds" and writes a file that is no library (as a cache on a noexec mount reads)
_JUNK_COMPILER = '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && echo junk > "$2"; shift; done\n'


@pytest.mark.parametrize("case", ["cache_is_not_a_directory", "compiler_cannot_run", "compiler_fails_silently",
                                  "library_does_not_load"])
def test_a_build_that_cannot_happen_falls_back(case, monkeypatch, tmp_path, rng):
    """Whatever stops the kernel's build or load, 'auto' gives the numpy path's bits and
    'compiled' a ValueError saying why (never an OSError out of mx.quantize)."""
    x = wide(rng, (2, 32))
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "cache"))
    cxx = tmp_path / "c++"
    if case == "cache_is_not_a_directory":
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "file" / "cache"))
        reason = "cannot create the cache directory .*file/cache: Not a directory .*FMTSIM_CACHE"
    elif case == "compiler_cannot_run":
        cxx.write_text("not a program")
        cxx.chmod(0o644)
        monkeypatch.setenv("CXX", str(cxx))
        reason = "cannot run the compiler .*c\\+\\+: Permission denied"
    else:
        cxx.write_text(_SILENT_COMPILER if case == "compiler_fails_silently" else _JUNK_COMPILER)
        cxx.chmod(0o755)
        monkeypatch.setenv("CXX", str(cxx))
        reason = ("compiling mx_blocks.cpp with .*c\\+\\+ failed: exit status 3, no message"
                  if case == "compiler_fails_silently" else "cannot load the library .*mx_blocks-")
    mx._LIBRARY.forget()
    try:
        with pytest.raises(ValueError, match="engine='compiled' is unavailable: the block quantizers' C\\+\\+ kernel: "
                           + reason):
            mx.quantize(x, engine="compiled")
        with pytest.warns(RuntimeWarning, match="runs the numpy path instead"):
            fallback = mx.quantize(x, "mxfp4")
        assert np.array_equal(fallback.codes, mx.quantize(x, "mxfp4", engine="numpy").codes)
    finally:
        mx._LIBRARY.forget()
    # a compiler that fails on every flag is not remembered as refusing the CPU's flags
    assert not list(tmp_path.rglob("*.failed"))


# refuses the CPU-tuning flags (as some compilers do), compiles everything else; logs each call
_NO_NATIVE_COMPILER = """#!/bin/sh
echo "$@" >> '{log}'
for a in "$@"; do case "$a" in -march=native|-mcpu=native) echo "error: unsupported '$a'" >&2; exit 1;; esac; done
exec '{cxx}' "$@"
"""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_refused_native_flags_are_remembered(monkeypatch, tmp_path, rng):
    """Where the compiler refuses -march=native the portable build runs (the same bits), the
    refusal is remembered in the cache so that a later process does not compile again, and
    the first build's notice on a terminal is one line."""
    real = find_compiler()
    log, cxx = tmp_path / "calls", tmp_path / "c++"
    cxx.write_text(_NO_NATIVE_COMPILER.format(log=log, cxx=real))
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("FMTSIM_CACHE", str(tmp_path / "cache"))
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    x = wide(rng, (4, 64))
    try:
        for _ in range(2):  # the second as a new process finds the cache: nothing held in memory
            mx._LIBRARY.forget()
            same(x, "mxfp8_e4m3")
    finally:
        mx._LIBRARY.forget()
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "=native" in calls[0], calls
    assert "=native" not in calls[1], calls
    assert err.getvalue().count("fmtsim: compiling the block quantizers' C++ kernel") == 1, err.getvalue()
