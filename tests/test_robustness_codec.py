"""Hypothesis draws arguments of the wrong type, shape, range and dtype for the codec's public
functions and for the CLI's commands. Every outcome must be either a result that passes the
function's own invariants, or a TypeError/ValueError with a message (CLI: exit 2 and one
``fmtsim: error:`` line). Anything else (another exception, a traceback, a silent wrong shape) fails.

EXAMPLES (below) sets how many cases each test draws; README.md reports the total.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fmtsim
from fmtsim.cli import main
from fmtsim.numbers import parse_number
from fmtsim.policy import NAN_MODES, OVERFLOW_MODES, PROFILES, ROUNDING_MODES

EXAMPLES = 500
CLI_EXAMPLES = 300
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
COMMANDS = st.sampled_from([["encode"], ["decode"], ["table"], ["formats"], ["diff"], ["gen"], ["bogus"], []])


def _run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=COMMANDS, rest=st.lists(TOKENS | st.text(max_size=6), max_size=6))
def test_cli_any_arguments(command, rest):
    argv = command + rest
    if command == ["gen"] and "--list" not in rest:
        argv = argv + ["--list"]  # never write files or print megabytes from a random draw
    rc, out, err = _run_cli(argv)
    assert rc in (0, 1, 2), (argv, rc)
    assert "Traceback" not in err
    if rc == 2 and "--help" not in argv and "-h" not in argv:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fmtsim: error: ") and len(lines[0]) > 16, (argv, err)
