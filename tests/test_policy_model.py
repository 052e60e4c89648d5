"""The policy fields beyond rounding/overflow/nan: fast paths equal the Fraction twin, and each
field does what its docstring says on hand-picked inputs (numbers from the formats' definitions)."""

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.conformance.models import boundary_points
from fmtsim.oracle import encode_one, round_ieee
from fmtsim.policy import Policy, resolve

from .conftest import slow_unless

NAN_BITS = {np.dtype(np.float16): np.uint16, np.dtype(ml_dtypes.bfloat16): np.uint16,
            np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
SRC = {np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16",
       np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}

# (format, policy) pairs covering every new field and value
POLICIES = [
    ("e4m3", Policy(overflow="nonsat", nan="canonical", overflow_nan="signed")),  # CUDA __NV_NOSAT
    ("e4m3", Policy(overflow="nonsat", overflow_check="before", inf="nan")),  # HIP host, no saturation
    ("e4m3", Policy(overflow="satfinite", inf="nan", nan="positive")),
    ("e5m2", Policy(overflow="nonsat", overflow_check="before", overflow_nan="canonical")),
    ("e5m2", Policy(nan="payload", overflow="nonsat")),
    ("e5m2", Policy(nan="quiet_payload", nan_negative="signed_all_ones")),
    ("e4m3", Policy(nan="payload", nan_negative="fixed", nan_code=0x7D)),
    ("e5m2", Policy(nan="inf", nan_sources=(("bfloat16", "positive"),))),
    ("e4m3fnuz", Policy(nan="as_inf", nan_unsigned_sources=("float16", "float32"), overflow_check="before")),
    ("e4m3", Policy(nan="signed_max", intermediate="float16")),  # OpenVINO-style double rounding
    ("e5m2", Policy(intermediate="float16", overflow="nonsat")),
    ("e4m3", Policy(intermediate="bfloat16", rounding="rtz")),
    ("e2m1", Policy(nan="neg_zero", inf="zero")),
    ("e3m2", Policy(nan="signed_max", tininess="after")),
    ("e4m3", Policy(tininess="after", rounding="rna")),
    ("e5m2", Policy(tininess="after", rounding="rup")),
    ("e4m3fnuz", Policy(overflow="nonsat", overflow_check="before", inf="max")),
    ("e8m0", Policy(rounding="rup", e8m0_negative="abs", e8m0_zero="min")),  # NVIDIA
    ("e8m0", Policy(rounding="rtz", overflow="nonsat", e8m0_negative="abs", e8m0_zero="min")),
    ("e8m0", Policy(overflow="nonsat", overflow_check="before", e8m0_tiny="nan", e8m0_negative="min",
                    e8m0_zero="min", e8m0_inf="max")),
    ("e8m0", Policy(nan_negative="fixed", nan_code=0, e8m0_negative="min", tininess="after")),
    ("e8m0", Policy()),  # the new satfinite default
    ("e8m0", Policy(overflow="nonsat")),
    ("e5m2", Policy(overflow="nonsat", nan="fixed", nan_code=0x7D, nan_code_sign="input")),  # NumKong serial
    ("e4m3", Policy(nan="fixed", nan_code=0x7E, nan_negative="fixed", nan_code_sign="negative")),
    ("e3m2", Policy(nan="fixed", nan_code=0x3F, nan_code_sign="positive")),
    # XLA's folded casts: a signalling NaN gets the HLO evaluator's code
    ("e5m2", Policy(overflow="nonsat", nan="quiet_payload", tininess="after",
                    nan_signaling_sources=(("bfloat16", "signed"), ("float32", "signed"), ("float64", "inf")))),
    ("e2m1", Policy(nan="zero", nan_negative="neg_zero", inf="zero",
                    nan_signaling_sources=(("float16", "zero_sign_flipped"), ("float32", "zero_sign_flipped"),
                                           ("float64", "max")))),
    # flag conventions (LLVM APFloat's, and mixed with other choices)
    ("e4m3", Policy(overflow="nonsat", rounding="rtz", tininess="result", flag_overflow="infinite",
                    flag_nan="signaling", flag_inf_nan="inexact")),
    ("e2m1", Policy(nan="zero", nan_negative="neg_zero", inf="zero", tininess="result", flag_overflow="infinite",
                    flag_nan="signaling", flag_inf_number="none")),
    ("e4m3fnuz", Policy(overflow="nonsat", nan="as_inf", flag_nan="signaling", flag_inf_nan="inexact",
                        flag_neg_zero="inexact", tininess="result")),
    ("e5m2", Policy(rounding="rup", tininess="result", flag_overflow="infinite", flag_inf_number="none")),
    ("ue4m3", Policy(flag_neg_zero="inexact", flag_nan="signaling", tininess="result")),
]
IDS = [f"{n}-{i}" for i, (n, _) in enumerate(POLICIES)]


def _specials(dtype):
    """NaNs with several payloads and both signs, Infs, zeros, for one source type."""
    ut = NAN_BITS[np.dtype(dtype)]
    width = np.dtype(ut).itemsize * 8
    man = {16: 10, 64: 52, 32: 23}[width] if dtype != ml_dtypes.bfloat16 else 7
    exp_ones = ((1 << (width - 1 - man)) - 1) << man
    pats = []
    for sign in (0, 1 << (width - 1)):
        for payload in (1, 1 << (man - 1), (1 << man) - 1, 1 << (man - 2), 3 << (man - 3) | 1):
            pats.append(sign | exp_ones | payload)
    nans = np.array(pats, dtype=ut).view(dtype)
    return np.concatenate([nans, np.array([np.inf, -np.inf, 0.0, -0.0], dtype=dtype)])


def _twin(xs, fmt, pol, dtype):
    src = SRC[np.dtype(dtype)]
    ut = NAN_BITS[np.dtype(dtype)]
    codes, flags = [], []
    for x in xs:
        with np.errstate(invalid="ignore"):
            bits = int(np.asarray(x, dtype).view(ut)) if np.isnan(x) else None
            c, fl = encode_one(float(x), fmt, profile=pol, src=src, nan_bits=bits,
                               negative_nan=bool(np.signbit(x)) if bits is not None else None)
        codes.append(c)
        flags.append(fl)
    return np.array(codes, dtype=np.uint8), np.array(flags, dtype=np.uint8)


def _inputs(fmt, dtype, n_random=300):
    rng = np.random.default_rng(15)
    pts = boundary_points(fmt, dtype)
    if np.dtype(dtype) == np.float64:
        rnd = rng.standard_normal(n_random) * 2.0 ** rng.integers(-140, 140, n_random)
    else:
        width = np.dtype(NAN_BITS[np.dtype(dtype)]).itemsize * 8
        rnd = rng.integers(0, 1 << width, n_random, dtype=np.uint64).astype(NAN_BITS[np.dtype(dtype)]).view(dtype)
    extra = np.array([464, -464, 465, 480, 61440, 57345, 2.0**127 * 1.5, 2.0**-128, 2.0**-127 * 0.75,
                      3.0, -3.0, 1e-40, -1e-40], dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.concatenate([pts.astype(dtype), rnd.astype(dtype), extra.astype(dtype), _specials(dtype)])


@pytest.mark.parametrize(("fmt", "pol"), slow_unless(POLICIES, keep={POLICIES[0], POLICIES[1], POLICIES[17]}),
                         ids=IDS)
@pytest.mark.parametrize("dtype", slow_unless([np.float32, np.float16, ml_dtypes.bfloat16, np.float64],
                                              keep={np.float32}), ids=["f32", "f16", "bf16", "f64"])
def test_fast_paths_equal_twin(fmt, pol, dtype):
    xs = _inputs(fmt, dtype)
    want_c, want_f = _twin(xs, fmt, pol, dtype)
    got = fmtsim.encode(xs, fmt, profile=pol)
    got_c, got_f = fmtsim.encode_with_flags(xs, fmt, profile=pol)
    bad = np.nonzero((got != want_c) | (got_c != want_c) | (got_f != want_f))[0]
    assert bad.size == 0, [(repr(xs[i]), int(got[i]), int(got_c[i]), int(want_c[i]), int(got_f[i]),
                            int(want_f[i])) for i in bad[:5]]


def test_sr_with_new_fields_equals_twin():
    pol = Policy(rounding="sr", overflow="nonsat", overflow_check="before", tininess="after",
                 intermediate="float16", nan="canonical", overflow_nan="signed")
    xs = _inputs("e4m3", np.float32, 200)
    rb = np.random.default_rng(3).integers(0, 2**32, xs.size, dtype=np.uint64)
    got_c, got_f = fmtsim.encode_with_flags(xs, "e4m3", profile=pol, rbits=rb)
    for x, r, c, fl in zip(xs, rb, got_c, got_f, strict=True):
        assert encode_one(float(x), "e4m3", profile=pol, src="float32", rbits=int(r),
                          negative_nan=bool(np.signbit(x))) == (c, fl), x


def test_documented_examples():
    nosat = Policy(overflow="nonsat", nan="canonical", overflow_nan="signed")
    x = np.float32([-465, np.nan, -np.nan, np.inf])
    assert fmtsim.encode(x, "e4m3", profile=nosat).tolist() == [0xFF, 0x7F, 0x7F, 0x7F]
    before = Policy(overflow="nonsat", overflow_check="before")
    # 449 rounds to 448 (OFP8: no overflow); checked before rounding it is above 448: NaN
    assert fmtsim.encode(np.float32([448, 449, -464]), "e4m3", profile=before).tolist() == [0x7E, 0x7F, 0xFF]
    assert fmtsim.encode(np.float32([448, 449, -464]), "e4m3", overflow="nonsat").tolist() == [0x7E, 0x7E, 0xFE]
    # E5M2: 57344 < x < 61440 rounds to 57344; checked before, it is Inf
    assert fmtsim.encode(np.float32([57345, 61439]), "e5m2", profile=before).tolist() == [0x7C, 0x7C]
    assert fmtsim.encode(np.float32([np.inf, -np.inf]), "e4m3", profile=Policy(inf="nan")).tolist() == [0x7F, 0xFF]
    assert fmtsim.encode(np.float32([np.inf, -np.inf]), "e2m1", profile=Policy(inf="zero")).tolist() == [0x0, 0x8]
    # payload: 0x7FA00000 has payload bits 01 at the top -> E5M2 0x7D; 0x7F800001 -> 0x7C (Inf)
    nans = np.array([0x7FA00000, 0x7F800001, 0xFFC00000], dtype=np.uint32).view(np.float32)
    assert fmtsim.encode(nans, "e5m2", profile=Policy(nan="payload")).tolist() == [0x7D, 0x7C, 0xFE]
    # per-source NaN: only bfloat16 loses the sign
    pol = Policy(nan_sources=(("bfloat16", "positive"),))
    assert fmtsim.encode(np.array([-np.nan], ml_dtypes.bfloat16), "e4m3", profile=pol).tolist() == [0x7F]
    assert fmtsim.encode(np.float32([-np.nan]), "e4m3", profile=pol).tolist() == [0xFF]
    # a fixed NaN code whose sign bit is the NaN's, dropped, forced or as given
    nans = np.array([0x7FC00000, 0xFFC00000, 0xFF800001], dtype=np.uint32).view(np.float32)
    for how, want in (("input", [0x7D, 0xFD, 0xFD]), ("positive", [0x7D] * 3), ("negative", [0xFD] * 3),
                      ("as_given", [0xFD] * 3)):
        fixed = Policy(nan="fixed", nan_code=0xFD, nan_code_sign=how)
        assert fmtsim.encode(nans, "e5m2", profile=fixed).tolist() == want, how
    # signalling NaNs (quiet bit clear) of one source under their own mode, either sign
    snan = Policy(nan="quiet_payload", nan_signaling_sources=(("float32", "inf"),))
    nans = np.array([0x7FA00000, 0xFFA00000, 0x7FE00000, 0xFFC00000], dtype=np.uint32).view(np.float32)
    assert fmtsim.encode(nans, "e5m2", profile=snan).tolist() == [0x7C, 0xFC, 0x7F, 0xFE]
    assert fmtsim.encode(nans.astype(np.float16), "e5m2", profile=snan).tolist() == [0x7F, 0xFF, 0x7F, 0xFE]


def test_double_rounding_through_float16():
    # 1.0625 + 2^-12 is above the E4M3 midpoint 1.0625 (-> 1.125), but float16 rounds it to the
    # midpoint 1.0625 itself (ulp 2^-10: 1.0625 + 2^-12 is nearer 1.0625), whose tie goes to 1.0
    x = np.float32([1.0625 + 2.0**-12])
    assert fmtsim.encode(x, "e4m3").tolist() == [0x39]
    assert fmtsim.encode(x, "e4m3", profile=Policy(intermediate="float16")).tolist() == [0x38]
    assert round_ieee(fmtsim.oracle.exact_value(float(x[0])), "float16") == 1.0625
    # float16 overflows at 65520: the intermediate Inf saturates like an Inf input
    assert fmtsim.encode(np.float32([70000]), "e5m2", overflow="nonsat",
                         profile=Policy(intermediate="float16")).tolist() == [0x7C]


def test_tininess_after_rounding():
    # E4M3 smallest normal 2^-6; 2^-6 * (1 - 2^-5) rounds up to it at precision 4
    x = np.float32([2.0**-6 * (1 - 2.0**-5), 2.0**-6 * (1 - 2.0**-4) + 2.0**-20])
    _, before = fmtsim.encode_with_flags(x, "e4m3")
    _, after = fmtsim.encode_with_flags(x, "e4m3", profile=Policy(tininess="after"))
    assert before.tolist() == [3, 3]  # inexact | underflow
    assert after.tolist() == [1, 3]


def test_flag_conventions():
    # 0.0146484375 = 1.875 * 2^-7: exact at E4M3's precision, so tiny after rounding with an
    # unbounded exponent; the format's own rounding gives 2^-6, the smallest normal: not tiny
    # under 'result'. Underflow: 2, inexact: 1, overflow: 4, invalid: 16, saturated: 32
    x = np.float32([0.0146484375])
    assert fmtsim.encode_with_flags(x, "e4m3", profile=Policy(tininess="after"))[1].tolist() == [3]
    assert fmtsim.encode_with_flags(x, "e4m3", profile=Policy(tininess="result"))[1].tolist() == [1]
    # 480 toward zero is 448: an overflow (IEEE 754 7.4) unless only Inf/NaN results count
    x = np.float32([480, 1e6])
    rtz = Policy(rounding="rtz", overflow="nonsat")
    assert fmtsim.encode_with_flags(x, "e4m3", profile=rtz)[1].tolist() == [37, 37]
    assert fmtsim.encode_with_flags(x, "e4m3", profile=Policy(rounding="rne", overflow="nonsat",
                                                            flag_overflow="infinite"))[1].tolist() == [5, 5]  # NaN
    assert fmtsim.encode_with_flags(x, "e4m3", profile=replace(rtz, flag_overflow="infinite"))[1].tolist() == [33, 33]
    # invalid for signalling NaNs only, whatever they become; Inf -> NaN inexact; -0 -> FNUZ inexact
    nans = np.array([0x7FA00000, 0x7FC00000], np.uint32).view(np.float32)
    sig = Policy(nan="zero", flag_nan="signaling")
    assert fmtsim.encode_with_flags(nans, "e2m1", profile=sig)[1].tolist() == [16, 0]
    assert fmtsim.encode_with_flags(nans, "e2m1", profile=Policy(nan="zero"))[1].tolist() == [16, 16]
    inf = np.float32([np.inf])
    assert fmtsim.encode_with_flags(inf, "e4m3", overflow="nonsat", profile=Policy(flag_inf_nan="inexact"))[1] == [1]
    assert fmtsim.encode_with_flags(inf, "e2m1", profile=Policy(inf="zero", flag_inf_number="none"))[1] == [0]
    nz = np.float32([-0.0])
    assert fmtsim.encode_with_flags(nz, "e4m3fnuz", profile=Policy(flag_neg_zero="inexact"))[1].tolist() == [1]
    assert fmtsim.encode_with_flags(nz, "e4m3fnuz")[1].tolist() == [0]
    with pytest.raises(ValueError, match="flag_overflow"):
        resolve("e4m3", profile=Policy(flag_overflow="never"))


def test_e8m0_defaults_follow_satfinite():
    x = np.float32([0, -0.0, -3, np.inf, -np.inf, np.nan, 1e-40, 2.0**127 * 1.75])
    assert fmtsim.encode(x, "e8m0").tolist() == [0x00, 0x00, 0x00, 0xFE, 0x00, 0xFF, 0x00, 0xFE]
    assert fmtsim.encode(x, "e8m0", overflow="nonsat").tolist() == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xFF]
    nv = Policy(rounding="rup", e8m0_negative="abs", e8m0_zero="min")
    assert fmtsim.encode(np.float32([0, -3, np.inf]), "e8m0", profile=nv).tolist() == [0x00, 0x81, 0xFE]


def test_bad_policy_fields_are_named():
    with pytest.raises(ValueError, match="overflow_check"):
        resolve("e4m3", profile=Policy(overflow_check="early"))
    with pytest.raises(ValueError, match="nan_code"):
        resolve("e4m3", profile=Policy(nan="fixed"))
    with pytest.raises(ValueError, match="no infinity"):
        resolve("e4m3", profile=Policy(nan="inf"))
    with pytest.raises(ValueError, match="intermediate"):
        resolve("e4m3", profile=Policy(intermediate="float8"))
    with pytest.raises(ValueError, match="e8m0_negative"):
        resolve("e8m0", profile=Policy(e8m0_negative="wrap"))
    with pytest.raises(TypeError, match="profile"):
        resolve("e4m3", profile=3)
    with pytest.raises(ValueError, match="nan_code_sign"):
        resolve("e5m2", profile=Policy(nan="fixed", nan_code=0x7D, nan_code_sign="kept"))
    with pytest.raises(ValueError, match="nan_signaling_sources source"):
        resolve("e5m2", profile=Policy(nan_signaling_sources=(("float8", "signed"),)))
    with pytest.raises(ValueError, match="no infinity"):
        resolve("e4m3", profile=Policy(nan_signaling_sources=(("float32", "inf"),)))
    with pytest.raises(ValueError, match="no sign bit"):
        resolve("e8m0", profile=Policy(nan="fixed", nan_code=0xFF, nan_code_sign="input"))


def test_resolved_is_grouped_typed_and_frozen():
    from dataclasses import FrozenInstanceError
    from typing import get_args

    from fmtsim.formats import get_format
    from fmtsim.policy import InputRule, IntermediateRule, NanMode, NanRule, OverflowRule, RoundingMode

    pol = resolve("e5m2", profile=Policy(nan="canonical", nan_negative="signed", overflow="nonsat",
                                         overflow_check="before", inf="nan", intermediate="float16",
                                         tininess="after", flag_nan="signaling"))
    assert pol.rounding == "rne"
    assert pol.on_overflow == OverflowRule("nonsat", "before", None) and not pol.on_overflow.saturating
    assert (pol.on_nan.mode, pol.on_nan.negative) == ("canonical", "signed")
    assert pol.on_input == InputRule("nan", "keep")
    assert pol.via == IntermediateRule("float16", "exact")
    assert (pol.flags.tininess, pol.flags.nan, pol.flags.overflow) == ("after", "signaling", "rounded")
    assert pol.e8m0.negative == "nan"  # nonsat: E8M0's inputs without a code are its NaN
    assert pol.without_intermediate().via == IntermediateRule()
    with pytest.raises(FrozenInstanceError):
        pol.on_nan.mode = "zero"  # type: ignore[misc]
    # each sub-rule checks itself against the format
    with pytest.raises(ValueError, match="no NaN encoding"):
        NanRule("signed", "signed").check(get_format("e2m1"))
    with pytest.raises(ValueError, match="satsym"):
        OverflowRule("satsym").check(get_format("e4m3"))
    with pytest.raises(ValueError, match="no zero"):
        InputRule("zero").check(get_format("e8m0"))
    with pytest.raises(ValueError, match="give intermediate"):
        IntermediateRule(None, "doubles_subnormal").check()
    # the run-time names are the Literal types' own
    assert fmtsim.ROUNDING_MODES == get_args(RoundingMode) and fmtsim.NAN_MODES == get_args(NanMode)


def test_for_source_applies_the_per_source_nan_rules():
    pol = resolve("e5m2", profile=Policy(nan="signed", nan_sources=(("bfloat16", "canonical"),),
                                         nan_signaling_sources=(("float32", "positive"),),
                                         nan_unsigned_sources=("float16",)))
    bf16, f32, f16 = (pol.for_source(s).on_nan for s in ("bfloat16", "float32", "float16"))
    assert (bf16.mode, bf16.negative, bf16.signaling, bf16.sign_dropped) == ("canonical", "canonical", None, False)
    assert (f32.mode, f32.signaling, f32.sign_dropped) == ("signed", "positive", False)
    assert (f16.mode, f16.signaling, f16.sign_dropped) == ("signed", None, True)
    assert f32.as_signaling().mode == f32.as_signaling().negative == "positive"
    # an explicit nan= replaces the profile's whole NaN choice, per-source rules included
    assert resolve("e5m2", nan="positive", profile="onnxruntime_nosat").for_source("bfloat16").on_nan.mode == "positive"


def test_source_type_records_match_numpy_and_ml_dtypes():
    from fmtsim.sources import SOURCE_TYPES, source_of, source_type

    for name, st in SOURCE_TYPES.items():
        fi = ml_dtypes.finfo(st.dtype)
        assert (st.man_bits, st.exp_bits, st.width) == (fi.nmant, fi.nexp, fi.bits), name
        assert (st.emin, st.emax) == (fi.minexp, fi.maxexp - 1), name
        assert st.bits_dtype.itemsize * 8 == st.width and source_of(st.dtype) is st
        quiet = int(np.array(np.nan, st.dtype).view(st.bits_dtype))
        assert quiet & st.quiet_bit and not quiet & st.sign_bit, name
    assert source_of(np.dtype(np.int8)) is None
    with pytest.raises(ValueError, match="unknown source type 'float8'; choose one of: float16"):
        source_type("float8")


def test_the_encoder_and_the_oracle_name_no_implementation():
    """What an implementation does lives in its profile module; the engine's modes are named for
    what they do. No string literal in rounding.py or oracle.py is a profile's or variant's name."""
    import ast
    import inspect

    from fmtsim import oracle, rounding
    from fmtsim.profiles import PROFILES

    names = set(PROFILES) | {"ml_dtypes", "torch", "torchao", "te", "cuda", "hip", "ptx", "apfloat", "openvino"}
    for module in (rounding, oracle):
        literals = {n.value for n in ast.walk(ast.parse(inspect.getsource(module)))
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & names, (module.__name__, literals & names)
