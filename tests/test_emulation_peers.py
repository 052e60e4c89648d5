"""The emulation libraries as implementations of ``fmtsim conform``: pychop (NumPy), qtorch (its CPU
extension) and CPFloat (through fmtsim's C shim, against the headers ``$CPFLOAT_PATH`` names).

Each peer's tests skip with the reason when that peer is absent; nothing here depends on what else
is installed. The fast tier holds each present peer on the boundary models and checks its known bugs
by hand; the full tier holds it on every model and checks that each named divergence's predicate is
exactly the set of inputs where the peer differs from its profile.
"""

from __future__ import annotations

import numpy as np
import pytest

import fmtsim
from fmtsim.conformance import impls
from fmtsim.conformance.adapters import Adapter, codes_of
from fmtsim.conformance.models import iter_models
from fmtsim.conformance.plugin import Request
from fmtsim.conformance.run import hold_to_variants, run
from fmtsim.formats import Format

PEERS = ("pychop", "qtorch", "cpfloat")
# pychop.Chop_'s NaN sign is the CPU's choice between two NaN operands, which differs between NumPy's
# vector loop and its tail: the divergence names every negative NaN, the ones that may differ
SUPERSETS = {"pychop.float_point_nan_sign"}


def _present(name: str) -> None:
    """Skip unless the peer ``name`` runs here (the reason names what is missing)."""
    if name == "pychop":
        pytest.importorskip("pychop", reason="pychop is not installed (pip install pychop==0.6.2)")
    elif name == "qtorch":
        pytest.importorskip("torch", reason="torch is not installed (qtorch needs it)")
        pytest.importorskip("qtorch", reason="qtorch is not installed (pip install qtorch==0.3.0)")
    why = impls.get_implementation(name).missing()
    if why is not None:
        pytest.skip(why)


# ---- fast tier, whatever is installed ------------------------------------------------------------

def test_the_three_are_registered_with_their_profiles_and_divergences():
    reg = impls.registry()
    for name in PEERS:
        impl = reg[name]
        assert impl.summary and impl.install and impl.checked_with, name
        assert impl.profiles and all(p in fmtsim.PROFILES for p in impl.profiles), name
        assert impl.divergences and all(d.name.startswith(f"{name}.") and d.description for d in impl.divergences)
        encs = impl.encoders(Request(tuple(fmtsim.FORMATS), None, None, False, big=False, recorded=True))
        assert encs and all(e.profile in impl.profiles for e in encs), name


def test_each_skips_with_its_reason_when_absent(monkeypatch, tmp_path):
    import importlib.util

    from fmtsim.conformance.impls import cpfloat

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *a: None if mod.split(".")[0] in ("pychop", "qtorch") else real(mod, *a))
    monkeypatch.setattr(cpfloat, "_candidates", lambda: [(tmp_path, "nowhere")])
    cpfloat._lib.cache_clear()
    try:
        reasons = {n: impls.get_implementation(n).missing() for n in PEERS}
        assert reasons["pychop"] == "pychop: the pychop package is not installed (pip install pychop==0.6.2)"
        assert reasons["qtorch"] is not None and reasons["qtorch"].startswith("qtorch: the ")
        assert "not installed" in reasons["qtorch"]
        assert reasons["cpfloat"] is not None and reasons["cpfloat"].startswith("cpfloat: CPFloat's headers")
        assert "CPFLOAT_PATH" in reasons["cpfloat"]
        skipped: list[str] = []
        rows = run(("fmtsim", *PEERS), formats=["e2m1"], big=False, skipped=skipped)
        assert [s.split(":")[0] for s in skipped] == list(PEERS)
        assert rows and all(r.impl.startswith("fmtsim") for r in rows)  # the others ran
        with pytest.raises(ValueError, match="^pychop: the pychop package is not installed"):
            run(("pychop",), formats=["e4m3ieee"], big=False)
    finally:
        cpfloat._lib.cache_clear()


def test_a_record_stands_in_for_the_format_it_is_named_after():
    """qtorch's E4M3 (every exponent finite, max 480) runs for ``e4m3``; values read back as its codes."""
    from fmtsim.profiles.qtorch import QTORCH_E4M3

    a = Adapter("x", lambda x, f: x, formats=("qtorch_e4m3", "e2m1"), records=(QTORCH_E4M3,))
    assert a.covering("e4m3") == "qtorch_e4m3" and a.covering("e2m1") == "e2m1" and a.covering("e5m2") is None
    assert a.record("qtorch_e4m3") is QTORCH_E4M3 and float(QTORCH_E4M3.max_finite) == 480
    got = codes_of([480.0, -480.0, 448.0, -0.0, 500.0, np.nan, np.inf, 1.0625], QTORCH_E4M3)
    assert got.tolist() == [0x7F, 0xFF, 0x7E, 0x80, -1, -1, -1, -1]
    assert codes_of([np.nan, -np.nan, np.inf, 57344.0], "e5m2").tolist() == [0x7E, 0xFE, 0x7C, 0x7B]


# ---- each peer, where it is installed --------------------------------------------------------------

def _rows_ok(name: str, big: bool) -> list:
    rows = run((name,), big=big)
    bad = [(r.impl, r.fmt, r.model, r.examples) for r in rows if r.failed]
    assert not bad, bad
    assert sum(r.cases for r in rows) > 0
    return rows


@pytest.mark.parametrize("name", PEERS)
def test_each_peer_conforms_on_the_boundaries(name):
    _present(name)
    _rows_ok(name, big=False)


def _adapter(name: str, label: str) -> Adapter:
    impl = impls.get_implementation(name)
    encs = impl.encoders(Request(tuple(fmtsim.FORMATS), None, None, False))
    hold_to_variants(impl, encs)
    return next(e for e in encs if e.name == label)


def _all_float16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)


def test_pychop_e4m3_gives_256_or_0_from_248_to_512():
    """Chop(4, 3) under rne: every float16 with 248 <= |x| < 512 comes out 256 or 0.0 (IEEE: Inf),
    2,176 of the 65,536 patterns; they, and only they, differ, all under chop_top_exponent."""
    _present("pychop")
    from pychop.np import LightChop_

    x = _all_float16()
    with np.errstate(all="ignore"):
        y = np.asarray(LightChop_(4, 3, 1, chunk_size=1 << 62).quantize(x.astype(np.float32)))
        a = np.abs(x.astype(np.float64))
    band = (a >= 248) & (a < 512)
    assert int(band.sum()) == 2176
    assert set(np.abs(y[band]).tolist()) == {0.0, 256.0}
    path = _adapter("pychop", "pychop.Chop[rmode=1]")
    keep, want = path.expected(x, "e4m3ieee")
    assert keep.all()
    differ = np.asarray(path.encode(x, "e4m3ieee")) != want
    assert np.array_equal(differ, band)  # and -0.0 -> +0 is the profile's (neg_zero_input='positive')
    known = path.known("e4m3ieee", "float16", x)
    assert np.array_equal(known["pychop.chop_top_exponent"], band)
    assert not any(m.any() for n, m in known.items() if n != "pychop.chop_top_exponent")


def test_pychop_rounding_modes_are_the_ones_named():
    """rmode 7 ("ties to zero") is ties toward -Inf, rmode 8 ("ties away") ties toward +Inf: on E4M3's
    ties 1.0625 (between 1 and 1.125) and -1.0625."""
    _present("pychop")
    from pychop.np import LightChop_

    x = np.array([1.0625, -1.0625, 1.1875, -1.1875], np.float64)
    got = {r: np.asarray(LightChop_(4, 3, r, chunk_size=1 << 62).quantize(x)).tolist() for r in (1, 7, 8)}
    assert got[1] == [1.0, -1.0, 1.25, -1.25]  # ties to even
    assert got[7] == [1.0, -1.125, 1.125, -1.25]  # ties toward -Inf (fmtsim's rnm)
    assert got[8] == [1.125, -1.0, 1.25, -1.125]  # ties toward +Inf (fmtsim's rnp)
    assert fmtsim.encode(x, "e4m3ieee", rounding="rnm").tolist() == fmtsim.encode(got[7], "e4m3ieee").tolist()
    assert fmtsim.encode(x, "e4m3ieee", rounding="rnp").tolist() == fmtsim.encode(got[8], "e4m3ieee").tolist()


def test_pychop_subnormal_false_flushes_every_input_below_the_smallest_normal():
    """LightChop_(..., subnormal=False) gives a zero of the input's sign for every input below the
    smallest normal (2^-6 in the IEEE-style E4M3), whatever the mode, even one that rounds to nearest
    up to 2^-6: fmtsim's subnormal_flush='inputs' (profile pychop_chop_ftz)."""
    _present("pychop")
    from pychop.np import LightChop_

    mn = 2.0**-6
    x = np.array([mn, mn * 0.9999, mn * 0.75, 2.0**-9, -mn * 0.75, -(2.0**-9)], np.float64)
    for rmode, mode in ((1, "rne"), (2, "rup"), (3, "rdn"), (4, "rtz")):
        got = np.asarray(LightChop_(4, 3, rmode, subnormal=False, chunk_size=1 << 62).quantize(x))
        assert got[0] == mn and (got[1:] == 0).all() and np.signbit(got[4:]).all() and not np.signbit(got[1:4]).any()
        want = fmtsim.encode(x, "e4m3ieee", profile="pychop_chop_ftz", rounding=mode)
        assert want.tolist() == fmtsim.encode(got, "e4m3ieee").tolist() == [0x08, 0, 0, 0, 0x80, 0x80]


def test_pychop_stochastic_modes_are_reproduced_from_the_bits_given():
    """Chop_'s rmode 5 with randfunc, and p3109_encode's stochastic_a with srbits: the same codes as
    fmtsim's sr from the same random bits, on values that are not on the grid."""
    _present("pychop")
    x = np.linspace(1.0, 2.0, 257, dtype=np.float64)[1:-1]
    for label, fmt in (("pychop.Chop_[rmode=5]", "e4m3ieee"), ("pychop.p3109[stochastic_a,finite]", "binary8p4se")):
        path = _adapter("pychop", label)
        _, want = path.expected(x, fmt)
        got = np.asarray(path.encode(x, fmt))
        assert np.array_equal(got, want), label
        assert len(set(got.tolist())) >= 8  # the bits do send values both ways


def test_qtorch_rounds_ties_away_reaches_480_and_drops_the_sign_of_zero():
    _present("qtorch")
    import torch
    from qtorch.quant import float_quantize

    x = torch.tensor([1.0625, 1.1875, -1.0625, 500.0, 1e30, float("inf"), -0.0, -1e-30, float("nan")])
    y = float_quantize(x, 4, 3, rounding="nearest").tolist()
    assert y[:3] == [1.125, 1.25, -1.125]  # ties away from zero (the README says to even)
    assert y[3:6] == [480.0, 480.0, 480.0]  # no NaN or Inf exponent: E4M3 reaches 480
    assert str(y[6]) == "0.0" and str(y[7]) == "0.0"  # -0 and a negative underflow give +0
    assert y[8] == 480.0  # a NaN is clamped like an overflow
    z = float_quantize(torch.tensor([0x7FFFFFFF], dtype=torch.int32).view(torch.float32), 4, 3, "nearest")
    assert z.view(torch.int32).item() == -(1 << 31)  # ... but 0x7FFFFFFF carries into the sign: -0.0


def test_cpfloat_e4m3_reaches_480_and_nan_7fffffff_becomes_minus_zero():
    _present("cpfloat")
    from fmtsim.conformance.impls.cpfloat import vendor_round

    x = np.array([448.0, 480.0, 490.0, 496.0, np.inf], np.float32)
    y = vendor_round(x, "cpfloat_e4m3", "rne")
    assert y[:3].tolist() == [448.0, 480.0, 480.0] and np.isnan(y[3:]).all()  # 480, then its NaN
    nan = np.array([0x7FFFFFFF, 0x7FC00000, 0xFFFFFFFF], np.uint32).view(np.float32)
    out = vendor_round(nan, "e5m2", "rne").view(np.uint32)
    assert out.tolist()[0] == 0x80000000 and np.isnan(vendor_round(nan, "e5m2", "rne")[1])
    assert out.tolist()[2] == 0  # the negative NaN's add wraps: +0
    path = _adapter("cpfloat", "cpfloat[rne]")
    assert path.known("e5m2", "float32", nan)["cpfloat.nan_payload_rounded"].tolist() == [True, False, True]


# ---- full tier: every model, every divergence exactly --------------------------------------------

def _exactly(name: str) -> set[str]:
    """Every entry point of ``name`` on every model: the inputs that differ from the profile are the
    union of the named divergences' predicates, each predicate names only inputs that differ (but the
    documented SUPERSETS, which must cover their differences), and no two overlap. The names seen."""
    impl = impls.get_implementation(name)
    encs = impl.encoders(Request(tuple(fmtsim.FORMATS), None, None, False))
    hold_to_variants(impl, encs)
    seen: set[str] = set()
    problems: list[str] = []
    for a in encs:
        for fmt in a.formats or ():
            rec: Format = a.record(fmt)
            for model, src, x in iter_models(rec, big=True):
                if src not in a.sources:
                    continue
                keep, want = a.expected(x, fmt)
                xs = x[keep]
                differ = np.asarray(a.encode(xs, fmt)).astype(np.int64) != want
                union = np.zeros(xs.shape, bool)
                for div, mask in a.known(fmt, src, xs).items():
                    mask = np.asarray(mask, bool)
                    if (mask & differ).any():
                        seen.add(div)
                    if div not in SUPERSETS and (mask & ~differ).any():
                        problems.append(f"{a.name} {fmt} {model} {src}: {div} names {int((mask & ~differ).sum())} "
                                        "inputs that do not differ")
                    if (mask & union).any():
                        problems.append(f"{a.name} {fmt} {model} {src}: {div} overlaps another divergence")
                    union |= mask
                if (differ & ~union).any():
                    problems.append(f"{a.name} {fmt} {model} {src}: {int((differ & ~union).sum())} unexplained")
    assert not problems, problems[:10]
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("name", PEERS)
def test_each_peer_conforms_on_every_model_and_each_divergence_is_exact(name):
    _present(name)
    _rows_ok(name, big=True)
    seen = _exactly(name)
    named = {d.name for d in impls.get_implementation(name).divergences}
    # every named bug is real: it shows on the models (a superset's may not, on another CPU: below)
    assert named - SUPERSETS <= seen <= named, named ^ seen


def test_pychop_float_point_nan_sign_follows_the_position_not_the_value():
    """Chop_'s rne gives a -NaN back as -NaN or +NaN by where it sits in the array: the reason its
    divergence names every negative NaN. Where this CPU and NumPy keep the sign at every position,
    the divergence covers nothing, and there is nothing to show."""
    _present("pychop")
    from pychop.np import Chop_

    from fmtsim.conformance.impls.pychop import _quick_gc

    signs = set()
    for n in range(1, 40):
        x = np.ones(n, np.float32)
        x[-1] = -np.nan
        with np.errstate(all="ignore"), _quick_gc():
            signs.add(bool(np.signbit(Chop_(prec="q43", rmode=1)(x)[-1])))
    if signs == {True}:
        pytest.skip("here a -NaN keeps its sign at every position (no vector loop takes the other NaN)")
    assert signs == {True, False}


@pytest.mark.slow
def test_pychops_arithmetic_is_reproduced_bit_for_bit():
    """The divergence predicates of Chop reproduce LightChop_'s float arithmetic: the reproduction gives
    pychop's own values on every model input, every mode and format, with subnormals and without."""
    _present("pychop")
    from fmtsim.conformance.impls import pychop as peer
    from fmtsim.profiles.pychop import CHOP_FORMATS, CHOP_MODES

    for fmt in CHOP_FORMATS:
        for model, src, x in iter_models(fmt, big=True):
            for rmode in CHOP_MODES:
                for subnormal in (True, False):
                    theirs = peer._chop_values(x, fmt, rmode, subnormal).astype(np.float64)
                    ours, _ = peer._chop_model(x, fmt, rmode, subnormal)
                    ours = np.asarray(ours, np.float64)
                    same = (theirs.view(np.uint64) == ours.view(np.uint64)) | (np.isnan(theirs) & np.isnan(ours))
                    assert same.all(), (fmt, model, src, rmode, subnormal, x[~same][:3])
