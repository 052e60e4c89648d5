"""The fast paths against the exact rational oracle (the slow twin)."""


import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fmtsim
from fmtsim.conformance.models import boundary_points
from fmtsim.oracle import encode_one
from fmtsim.policy import resolve
from fmtsim.rounding import encode_f64, table_f32

from .conftest import ALL_FORMATS, slow_unless

MODES = ["rne", "rna", "rtz", "rup", "rdn"]
# the table test covers the modes beyond IEEE 754's too (ties toward zero / -Inf, to odd: monotone too)
TABLE_MODES = [*MODES, "rnz", "rnm", "rnp", "rto"]


def overflow_modes(name):
    f = fmtsim.get_format(name)
    modes = ["satfinite"]
    if f.has_inf or f.has_nan:
        modes.append("nonsat")
    if f.kind == "int" and f.signed:
        modes.append("satsym")
    return modes


def nan_modes(name):
    f = fmtsim.get_format(name)
    if name == "e8m0":
        return ["signed", "signed_all_ones"]
    if f.has_nan:
        return ["signed", "canonical", "all_ones", "signed_all_ones", "max", "zero", "zero_sign_flipped"]
    return ["max", "zero", "zero_sign_flipped"] + (["payload_rounded"] if f.kind == "float" else [])


def oracle_codes(xs, name, mode, ov, nan=None, src="float64"):
    codes, flags = [], []
    for x in xs:
        bits = int(np.asarray(x, np.float32).view(np.uint32)) if np.isnan(x) else None
        c, fl = encode_one(float(x), name, mode, ov, nan, src=src,
                           negative_nan=bool(np.signbit(x)), nan_bits32=bits)
        codes.append(c)
        flags.append(fl)
    return np.array(codes, dtype=np.uint8), np.array(flags, dtype=np.uint8)


# the fast tier: FP4, an OCP FP8, an FNUZ FP8, E8M0 and MX INT8 (the other paths with --full)
@pytest.mark.parametrize("name", slow_unless(ALL_FORMATS, keep={"e2m1", "e4m3", "e5m2fnuz", "e8m0", "mxint8"}))
@pytest.mark.parametrize("dtype", slow_unless([np.float16, ml_dtypes.bfloat16, np.float32, np.float64],
                                              keep={np.float32}), ids=["f16", "bf16", "f32", "f64"])
def test_midpoints_and_neighbours_all_modes(name, dtype):
    xs = boundary_points(name, dtype)
    for mode in MODES:
        for ov in overflow_modes(name):
            pol_nan = "zero" if not fmtsim.get_format(name).has_nan else None
            got = fmtsim.encode(xs, name, rounding=mode, overflow=ov, nan=pol_nan)
            got_c, got_f = fmtsim.encode_with_flags(xs, name, rounding=mode, overflow=ov,
                                                    nan=pol_nan)
            want_c, want_f = oracle_codes(xs, name, mode, ov, pol_nan)
            bad = np.nonzero((got != want_c) | (got_c != want_c) | (got_f != want_f))[0]
            assert bad.size == 0, [
                (float(xs[i]), hex(got[i]), hex(got_c[i]), int(got_f[i]), hex(want_c[i]),
                 int(want_f[i])) for i in bad[:5]
            ] + [name, mode, ov]


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_nan_policies(name):
    # quiet and signalling payloads of both signs (nan='payload_rounded' reads the payload), and -0.0
    payloads = np.array([0x7F800001, 0x7FFFFFFF, 0xFFA00000, 0x7FE00000], np.uint32).view(np.float32)
    xs = np.concatenate([np.array([np.nan, -np.nan, 1.0, -0.0, -1e-30], dtype=np.float32), payloads])
    for nan in nan_modes(name):
        got_c, got_f = fmtsim.encode_with_flags(xs, name, nan=nan)
        want_c, want_f = oracle_codes(xs, name, "rne", "satfinite", nan)
        assert np.array_equal(got_c, want_c) and np.array_equal(got_f, want_f), nan
        assert np.array_equal(fmtsim.encode(xs, name, nan=nan), want_c)


def _interesting(name, reps):
    """Table indices whose representative is near the format's range (else: long constant runs)."""
    f = fmtsim.get_format(name)
    a = np.abs(reps)
    lo = float(f.min_positive) / 16
    hi = float(f.max_finite) * 4
    return (a == 0) | ((a >= lo) & (a <= hi)) | ~np.isfinite(a)


NEAR_ONE_BY_ONE = 4096  # more near entries than this (8-bit formats; E8M0: all of float32): their runs' ends


def _run_ends(sel, table, reps):
    """Both ends of every run of equal table entries among the indices ``sel`` (ascending),
    runs also broken at a change of sign or of finiteness: the oracle is monotone in the
    magnitude within a sign, so entries between two ends that agree with it agree too."""
    if not sel.size:
        return sel
    key = np.stack([table[sel].astype(np.int64), np.signbit(reps[sel]), np.isfinite(reps[sel])])
    breaks = np.nonzero((np.diff(sel) != 1) | np.any(np.diff(key, axis=1) != 0, axis=0))[0]
    return np.unique(np.concatenate([sel[:1], sel[breaks], sel[breaks + 1], sel[-1:]]))


@pytest.mark.parametrize("name", slow_unless(ALL_FORMATS, keep={"e2m1", "ue4m3"}))
def test_every_float32_table_entry(name):
    """Each entry of the float32 round-to-odd table equals the oracle at its representative.

    Entries near the format's range are checked one by one for the FP4/FP6 formats; for the
    wider ones (E8M0's range is all of float32's), at both ends of every run of equal entries,
    as outside the range: the table is constant on each run and the oracle is monotone, so
    every entry in between agrees with it too.
    """
    for mode in TABLE_MODES:
        for ov in overflow_modes(name):
            pol = resolve(name, mode, ov, "zero" if not fmtsim.get_format(name).has_nan else None)
            table, s = table_f32(pol)
            idx = np.arange(table.size, dtype=np.uint64) << np.uint64(s)
            reps = idx.astype(np.uint32).view(np.float32)
            with np.errstate(invalid="ignore"):  # signalling-NaN patterns are quieted: they are cases here
                near = _interesting(name, reps.astype(np.float64))
            check = np.nonzero(near)[0]
            if check.size > NEAR_ONE_BY_ONE:
                check = _run_ends(check, table, reps)
            far = np.nonzero(~near)[0]
            # ends of every far run
            if far.size:
                breaks = np.nonzero(np.diff(far) != 1)[0]
                ends = np.unique(np.concatenate([far[:1], far[breaks], far[breaks + 1], far[-1:]]))
                check = np.concatenate([check, ends])
                for run in np.split(far, breaks + 1):
                    assert np.unique(table[run]).size == 1, (name, mode, ov)
            want, _ = oracle_codes(reps[check], name, mode, ov, pol.on_nan.mode, src="float32")
            bad = np.nonzero(table[check] != want)[0]
            assert bad.size == 0, [(hex(int(idx[check[i]])), hex(table[check[i]]),
                                    hex(want[i])) for i in bad[:5]]


@pytest.mark.parametrize("name", ALL_FORMATS)
def test_sixteen_bit_tables_equal_float32_path(name):
    """Every float16 and bfloat16 pattern: its own table == the float32 path on the same value."""
    pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for dt in (np.float16, ml_dtypes.bfloat16):
        x = pats.view(dt)
        for mode in MODES:
            for ov in overflow_modes(name):
                kw = dict(rounding=mode, overflow=ov, nan="zero" if not fmtsim.get_format(name).has_nan else None)
                assert np.array_equal(fmtsim.encode(x, name, **kw),
                                      fmtsim.encode(x.astype(np.float32), name, **kw))


finite64 = st.floats(allow_nan=False, allow_infinity=False, width=64)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=300, deadline=None)
@given(x=st.lists(finite64, min_size=1, max_size=20), name=st.sampled_from(ALL_FORMATS),
       mode=st.sampled_from(MODES))
def test_hypothesis_float64(x, name, mode):
    xs = np.array(x, dtype=np.float64)
    for ov in overflow_modes(name):
        got = fmtsim.encode(xs, name, rounding=mode, overflow=ov)
        want, _ = oracle_codes(xs, name, mode, ov)
        assert np.array_equal(got, want)


@settings(max_examples=300, deadline=None)
@given(x=st.lists(finite32, min_size=1, max_size=20), name=st.sampled_from(ALL_FORMATS),
       mode=st.sampled_from(MODES), scale=st.integers(-20, 20))
def test_hypothesis_float32_scaled_to_format(x, name, mode, scale):
    """float32 inputs pulled into the format's range, where the interesting cases live."""
    xs = (np.array(x, dtype=np.float64) % 8.0 * 2.0**scale * np.sign(np.array(x) + 0.5)).astype(np.float32)
    got = fmtsim.encode(xs, name, rounding=mode)
    want, _ = oracle_codes(xs, name, mode, "satfinite", src="float32")
    assert np.array_equal(got, want)


def test_engine_is_exact_on_float64_double_rounding_case():
    # docs/rules.md §2 (ml_dtypes 0.6): float64 1.0625 + 2^-40 -> E4M3 must be 1.125 (through float32: 1.0)
    x = np.array([1.0625 + 2.0**-40])
    assert fmtsim.decode(fmtsim.encode(x, "e4m3"), "e4m3")[0] == 1.125
    c, _ = encode_f64(x, resolve("e4m3"))
    assert c[0] == encode_one(float(x[0]), "e4m3")[0]


@pytest.mark.parametrize("name", ["e2m1", "e3m2", "e4m3", "e5m2"])
def test_an_exact_negative_zero_input_can_be_written_as_plus_zero(name):
    """neg_zero_input='positive' (TransformerEngine's reference FP4 cast): the fast path and the
    oracle write an exact -0.0 as +0, and only it: a negative value that rounds to zero keeps -0."""
    from fmtsim.policy import Policy

    xs = np.array([-0.0, 0.0, -1e-30, -1.0, 1.0], np.float32)
    pol = Policy(neg_zero_input="positive")
    got_c, got_f = fmtsim.encode_with_flags(xs, name, profile=pol, nan="zero")
    want = [encode_one(float(x), name, profile=pol, nan="zero", src="float32") for x in xs]
    assert got_c.tolist() == [c for c, _ in want] and got_f.tolist() == [f for _, f in want]
    keep = fmtsim.encode(xs, name, nan="zero")
    neg_zero = fmtsim.get_format(name).sign_mask
    assert got_c[0] == 0 and keep[0] == neg_zero and got_c[2] == keep[2] == neg_zero


@pytest.mark.parametrize("name", ["e2m1", "e4m3", "e5m2", "binary8p3se", "e4m3fnuz"])
def test_a_negative_underflow_can_be_written_as_plus_zero(name, rng):
    """neg_underflow='positive' (qtorch, pychop's Chop_, CPFloat's directed modes): a negative nonzero
    input whose result is zero gets +0, in the fast path, the compiled stochastic rounding and the
    oracle alike, with the rounding's flags; -0.0 itself stays the neg_zero_input rule's."""
    from fmtsim.policy import Policy

    f = fmtsim.get_format(name)
    tiny = float(f.min_positive)
    xs = np.array([-0.0, 0.0, -tiny / 4, -tiny / 2, -tiny * 0.75, -tiny, tiny / 4, -1.0], np.float32)
    for mode in ("rne", "rtz", "rup", "rnp"):
        pol = Policy(rounding=mode, neg_underflow="positive")
        got_c, got_f = fmtsim.encode_with_flags(xs, name, profile=pol, nan="zero")
        want = [encode_one(float(x), name, profile=pol, nan="zero", src="float32") for x in xs]
        assert got_c.tolist() == [c for c, _ in want] and got_f.tolist() == [fl for _, fl in want], mode
        assert np.array_equal(fmtsim.encode(xs, name, profile=pol, nan="zero"), got_c)
        keep = fmtsim.encode(xs, name, rounding=mode, nan="zero")
        if f.has_neg_zero:
            assert got_c[0] == keep[0] == f.sign_mask  # -0.0 is neg_zero_input's
            assert got_c[2] == 0 and keep[2] == f.sign_mask  # -tiny/4 rounds to zero: +0 here, -0 by default
        assert np.array_equal(got_c[5:], keep[5:])  # nonzero results are untouched
    r = rng.integers(0, 1 << 32, 1000, dtype=np.uint64).astype(np.uint32)
    x = (-rng.random(1000) * tiny * 2).astype(np.float32)
    pol = Policy(rounding="sr", neg_underflow="positive")
    got = fmtsim.encode(x, name, profile=pol, rbits=r, nan="zero")
    want = [encode_one(float(v), name, profile=pol, nan="zero", rbits=int(k), src="float32")[0]
            for v, k in zip(x, r, strict=True)]
    assert got.tolist() == want
    assert not f.has_neg_zero or f.sign_mask not in got.tolist()


@pytest.mark.parametrize("name", ["e2m1", "e4m3", "e5m2", "e2m3", "binary8p3se", "e4m3fnuz"])
def test_subnormals_flushed_on_input_or_on_result(name, rng):
    """subnormal_flush='inputs' (pychop's subnormal=False) and 'results' (flush-to-zero hardware): the
    fast path, the flags and the compiled stochastic rounding equal the oracle on the subnormal range,
    its edges and beyond; the flushed zero keeps the input's sign unless neg_underflow says +0."""
    from fmtsim.policy import Policy

    f = fmtsim.get_format(name)
    mn = float(f.min_normal)
    edge = np.array([mn, mn * (1 - 2**-12), mn * 0.75, float(f.min_positive), float(f.min_positive) / 2, 1.0, 0.0])
    xs = np.concatenate([edge, -edge, rng.random(60) * mn * 1.2, -rng.random(60) * mn * 1.2]).astype(np.float32)
    for flush in ("inputs", "results"):
        for mode, neg in (("rne", "keep"), ("rup", "keep"), ("rdn", "positive"), ("rtz", "keep")):
            pol = Policy(rounding=mode, subnormal_flush=flush, neg_underflow=neg)
            got_c, got_f = fmtsim.encode_with_flags(xs, name, profile=pol, nan="zero")
            want = [encode_one(float(x), name, profile=pol, nan="zero", src="float32") for x in xs]
            assert got_c.tolist() == [c for c, _ in want] and got_f.tolist() == [fl for _, fl in want], (flush, mode)
            assert np.array_equal(fmtsim.encode(xs, name, profile=pol, nan="zero"), got_c)
            values = np.abs(f.values[got_c])
            assert not ((values > 0) & (values < mn)).any()  # no subnormal survives either rule
            if flush == "inputs":
                assert (values[np.abs(xs) < mn] == 0).all()  # whatever the mode, even rup / rdn
        pol = Policy(rounding="sr", subnormal_flush=flush)
        r = rng.integers(0, 1 << 32, xs.size, dtype=np.uint64).astype(np.uint32)
        got = fmtsim.encode(xs, name, profile=pol, rbits=r, nan="zero")
        assert got.tolist() == [encode_one(float(x), name, profile=pol, nan="zero", rbits=int(k), src="float32")[0]
                                for x, k in zip(xs, r, strict=True)], flush
    for other in ("int8", "e8m0"):
        with pytest.raises(ValueError, match="has no subnormals"):
            fmtsim.encode(np.float32([1.0]), other, profile=Policy(subnormal_flush="inputs"))
    with pytest.raises(ValueError, match="unknown subnormal_flush"):
        fmtsim.encode(np.float32([1.0]), "e4m3", profile=Policy(subnormal_flush="daz"))


def test_nan_modes_named_after_implementations_say_their_new_names():
    for old, new in (("ml_dtypes", "zero_sign_flipped"), ("torchao", "payload_rounded"), ("te", "neg_zero_input")):
        with pytest.raises(ValueError, match=f"nan={old!r} is now .*{new}"):
            fmtsim.encode(np.array([1.0], np.float32), "e2m1", nan=old)
