"""Hypothesis draws arguments of the wrong type, shape, range and dtype for the codec's public
functions and for the CLI's commands. Every outcome must be either a result that passes the
function's own invariants, or a TypeError/ValueError with a message (CLI: exit 2 and one
``fmtsim: error:`` line). Anything else (another exception, a traceback, a silent wrong shape) fails.

EXAMPLES (below) sets how many cases each test draws; README.md reports the total.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fmtsim
from fmtsim.cli import main
from fmtsim.numbers import parse_number
from fmtsim.policy import NAN_MODES, OVERFLOW_MODES, PROFILES, ROUNDING_MODES

from .conftest import examples  # noqa: E402

EXAMPLES = examples(500)  # a quarter outside --full (conftest.examples)
CLI_EXAMPLES = examples(300)
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

GARBAGE_TEXT = st.sampled_from(["", "e9m9", "E4M3 ", "float8", "fp8", "nope", "0", "-1", "\x00", "é"])
FORMAT_NAMES = st.sampled_from(sorted(fmtsim.FORMATS)) | st.sampled_from(
    ["float8_e4m3fn", "float4_e2m1fn", "float8_e8m0fnu", "fp4", "FP8_E5M2"]) | GARBAGE_TEXT
FORMATS = FORMAT_NAMES | st.none() | st.integers(-3, 300) | st.just(3.5) | st.just(b"e4m3")


def _choice(valid):
    return st.none() | st.sampled_from(list(valid)) | GARBAGE_TEXT | st.integers(-1, 3) | st.just(True)


DTYPES = st.sampled_from([np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                          np.uint64, np.float16, np.float32, np.float64, np.complex64, ml_dtypes.bfloat16,
                          ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn, ml_dtypes.int4])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


@st.composite
def arrays(draw):
    dt = np.dtype(draw(DTYPES))
    shape = draw(SHAPES)
    if dt.kind in "iub":
        return draw(hnp.arrays(dt, shape))
    bits = draw(hnp.arrays(np.dtype(f"u{dt.itemsize}"), shape))
    return bits.view(dt)


ODD_INPUTS = st.sampled_from([None, "1.5", b"\x01", [1, [2, 3]], {"a": 1}, object(), [], [[]], 2**70, -(2**64),
                              1j, True, np.ma.masked_array([1.0], mask=[True]), np.array(["a", "b"]),
                              np.array([1, "a"], dtype=object), float("nan"), float("inf"), -0.0, 2**53 + 1])
INPUTS = arrays() | ODD_INPUTS | st.lists(st.floats(allow_nan=True, width=32), max_size=6) | st.floats()


def _expect_clean(call):
    """Run call(); return its result, or None after a TypeError/ValueError with a message."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return call()
    except (TypeError, ValueError) as e:
        assert str(e).strip(), f"{type(e).__name__} without a message"
        return None


@SETTINGS
@given(x=INPUTS, fmt=FORMATS, rounding=_choice(ROUNDING_MODES), overflow=_choice(OVERFLOW_MODES),
       nan=_choice(NAN_MODES), profile=_choice(PROFILES), with_rbits=st.booleans())
def test_encode_any_arguments(x, fmt, rounding, overflow, nan, profile, with_rbits):
    rbits = None
    if with_rbits:
        rbits = np.zeros(np.shape(x) if isinstance(x, np.ndarray) else (), dtype=np.uint32)
    kwargs = dict(rounding=rounding, overflow=overflow, nan=nan, profile=profile, rbits=rbits)
    codes = _expect_clean(lambda: fmtsim.encode(x, fmt, **kwargs))
    if codes is None:
        return
    f = fmtsim.get_format(fmt)
    c = np.asarray(codes)
    assert c.dtype == np.uint8 and c.shape == np.shape(np.asarray(x))
    assert (c.astype(np.int64) < f.n_codes).all()
    c2, flags = fmtsim.encode_with_flags(x, fmt, **kwargs)
    assert np.array_equal(np.asarray(c2), c) and np.asarray(flags).shape == c.shape
    assert (np.asarray(flags) < 64).all()


DECODE_DTYPES = st.sampled_from([np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8,
                                 "float32", "f8", None, "nope", object, ml_dtypes.float8_e4m3fn])


@SETTINGS
@given(codes=INPUTS, fmt=FORMATS, dtype=DECODE_DTYPES, mask=st.booleans() | st.just(None))
def test_decode_any_arguments(codes, fmt, dtype, mask):
    out = _expect_clean(lambda: fmtsim.decode(codes, fmt, dtype, mask=mask))
    if out is None:
        return
    f = fmtsim.get_format(fmt)
    o = np.asarray(out)
    assert o.shape == np.shape(np.asarray(codes)) and o.dtype == np.dtype(dtype or np.float32)
    c = np.asarray(codes).astype(np.int64) & (f.n_codes - 1)
    assert np.array_equal(o.astype(np.float64), f.values[c].astype(o.dtype).astype(np.float64), equal_nan=True)


@SETTINGS
@given(x=INPUTS, fmt=FORMATS, rounding=_choice(ROUNDING_MODES), dtype=DECODE_DTYPES)
def test_quantize_any_arguments(x, fmt, rounding, dtype):
    out = _expect_clean(lambda: fmtsim.quantize(x, fmt, rounding=rounding, dtype=dtype))
    if out is None:
        return
    f = fmtsim.get_format(fmt)
    ref = fmtsim.decode(fmtsim.encode(x, fmt, rounding=rounding), f, dtype=np.asarray(out).dtype)
    assert np.array_equal(np.asarray(out), np.asarray(ref), equal_nan=True)


@SETTINGS
@given(text=st.text(max_size=12) | st.from_regex(r"[+-]?(0x)?[0-9a-fA-F.]{0,8}([eEpP][+-]?[0-9]{0,30})?",
                                                   fullmatch=True))
def test_parse_number_any_text(text):
    v = _expect_clean(lambda: parse_number(text))
    if v is not None:
        assert isinstance(v, float) or v.denominator > 0


# ---------------------------------------------------------------- the CLI

TOKENS = st.sampled_from(["e4m3", "e2m1", "e8m0", "ue4m3", "int4", "mxint8", "bogus", "0x7f", "0x80", "0b101",
                          "256", "-1", "1.5", "-0", "nan", "inf", "1e999", "0x1p2000", "1/0", "--rounding", "sr",
                          "rne", "--rbits", "0x10", "--overflow", "nonsat", "--nan", "raise", "--profile", "ptx",
                          "--src", "float16", "--format", "--csv", "--list", "--operands", "--level", "3", "x",
                          "f32_to_e4m3.*", "--", "-"])
COMMANDS = st.sampled_from([["encode"], ["decode"], ["table"], ["formats"], ["diff"], ["gen"], ["bogus"], [],
                            ["ver"], ["probe", "infer"], ["probe", "gen"], ["checkpoint", "inspect"],
                            ["checkpoint", "dequantize"], ["checkpoint", "convert"], ["checkpoint", "explain"],
                            ["checkpoint", "diff"], ["fnuz", "convert"], ["conform", "--quick", "--impl"]])
# paths a random command may name: missing, special, a directory, an empty and a garbage file
PATH_TOKENS = st.sampled_from(["missing.safetensors", "/dev/null", "emptydir", "empty.safetensors", "garbage.bin",
                               "out", "out/", "probe.fp8.d.bin", "--to", "nvfp4", "fnuz", "--dtype", "bfloat16",
                               "--original", "--json", "--set", "fp8", "--probes", "--require-exact", "--jobs",
                               "0", "--producer", "gpt-oss-mxfp4", "f32_to_e2m1.rne.satfinite.encode_ties.tv",
                               "ml_dtypes", "torch", "fmtsim", "e2m1"])


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-robustness")
    (d / "emptydir").mkdir()
    (d / "empty.safetensors").write_bytes(b"")
    (d / "garbage.bin").write_bytes(bytes(range(256)) * 3)
    (d / "probe.fp8.d.bin").write_bytes(b"\x00" * 64)
    return d


@settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=COMMANDS, rest=st.lists(TOKENS | PATH_TOKENS | st.text(max_size=6), max_size=6))
def test_cli_any_arguments(scratch, command, rest):
    argv = command + rest
    if command == ["gen"] and "--list" not in rest:
        argv = argv + ["--list"]  # never write files or print megabytes from a random draw
    if command[:1] == ["conform"] and not rest:
        return  # a whole conformance run is not a robustness case
    if command == ["conform", "--quick", "--impl"]:
        argv = argv + ["--formats", "e2m1"]
    here = os.getcwd()
    os.chdir(scratch)  # contextlib.chdir is Python 3.11+
    try:
        rc, out, err = _run_cli(argv)
    finally:
        os.chdir(here)
    assert rc in (0, 1, 2), (argv, rc)
    assert "Traceback" not in err
    if rc == 2 and "--help" not in argv and "-h" not in argv:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fmtsim: error: ") and len(lines[0]) > 16, (argv, err)


UNIT_NAMES = st.sampled_from(["exact", "sm89_mma_fp8", "sm90_wgmma_fp8", "sm90_wgmma_fp16", "sm100_f8f6f4",
                              "sm100_mxf8f6f4", "sm100_mxf4", "sm100_mxf4nvf4", "cdna3_mfma_fp8", "cdna3_mfma_fp16",
                              "SM90_WGMMA_FP8", "nope", ""]) | st.none() | st.integers(0, 3)
OPERAND_FORMATS = st.sampled_from(["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "e4m3fnuz", "e5m2fnuz", "fp16", "bf16",
                                   "e8m0", "int8", "bogus"]) | st.none()


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), m=st.integers(0, 3), n=st.integers(0, 3), k_blocks=st.integers(0, 3),
       dtype=st.sampled_from([np.int64, np.uint8, np.int16]), with_c=st.sampled_from([None, "ok", "shape", "int"]))
def test_matmul_any_arguments(data, m, n, k_blocks, dtype, with_c):
    """A valid configuration (a row of the GEMM vector cases), then, half the time, one argument wrong."""
    from fmtsim.conformance.gemm_vectors import GEMM_CASES
    from fmtsim.mma import matmul

    unit, a_format, b_format, scales, block = data.draw(st.sampled_from(GEMM_CASES))
    k = 64 * k_blocks
    wrong = data.draw(st.sampled_from([None, None, None, "unit", "a_format", "b_format", "k_b", "scales", "block",
                                       "dtype"]))
    if wrong == "unit":
        unit = data.draw(UNIT_NAMES)
    if wrong == "a_format":
        a_format = data.draw(OPERAND_FORMATS)
    if wrong == "b_format":
        b_format = data.draw(OPERAND_FORMATS)
    if wrong == "scales":
        scales = data.draw(st.sampled_from([None, "e8m0", "ue4m3", "bogus"]))
    if wrong == "block":
        block = data.draw(st.sampled_from([None, 16, 32, 7, 0]))
    if wrong == "dtype":
        dtype = data.draw(st.sampled_from([np.float32, np.bool_, object]))
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a = rng.integers(0, 16, (m, k)).astype(dtype)
    b = rng.integers(0, 16, (k + (32 if wrong == "k_b" else 0), n)).astype(dtype)
    c = {None: None, "ok": np.ones((m, n), np.float32), "shape": np.ones((n + 1, m), np.float32),
         "int": np.ones((m, n), np.int32)}[with_c]
    kw = {}
    if scales is not None:
        bs = block if isinstance(block, int) and block > 0 else 32
        kw = dict(a_scales=np.full((m, k // bs), 120), b_scales=np.full((k // bs, n), 120),
                  scale_format=scales, block_size=block)
    d = _expect_clean(lambda: matmul(a, b, c, unit=unit, a_format=a_format, b_format=b_format, **kw))
    event("result" if d is not None else "refused")
    if d is not None:
        # fp32 D, but float64 for the fp64 FMA chains (their D is never narrowed)
        from fmtsim.mma.units import get_unit

        want_dtype = np.float64 if get_unit(unit).c_format == "fp64" else np.float32
        assert d.dtype == want_dtype and d.shape == (m, n)
