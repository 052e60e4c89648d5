"""Conformance as plugins: every implementation is one registered object, the runner names none."""

import importlib.util
import inspect
import subprocess
import sys

import numpy as np
import pytest

import fmtsim
from fmtsim.conformance import impls, run
from fmtsim.conformance.adapters import Adapter
from fmtsim.conformance.divergences import Divergence
from fmtsim.conformance.plugin import CAPABILITIES, Implementation, Request
from fmtsim.policy import PROFILES

BUILT_IN = {"fmtsim", "ml_dtypes", "torch", "torchao", "mmasim", "onnx", "gfloat", "pychop", "qtorch", "cpfloat"}


def test_the_registry_holds_every_built_in_with_a_valid_claim():
    reg = impls.registry()
    assert BUILT_IN <= set(reg)
    for name, impl in reg.items():
        assert impl.name == name and impl.summary
        assert impl.capabilities and set(impl.capabilities) <= set(CAPABILITIES), name
        assert set(impl.profiles) <= set(PROFILES), (name, impl.profiles)
        for d in impl.divergences:
            assert d.name.startswith(f"{name}.") and d.formats and d.sources, d.name
        # building the entry points needs no package of the implementation's own
        req = Request(tuple(fmtsim.FORMATS), None, None, False, big=False)
        for enc in impl.encoders(req) if "encode" in impl.capabilities else []:
            assert isinstance(enc, Adapter) and enc.profile in PROFILES, (name, enc.name)
            assert set(enc.sources) <= {"float16", "bfloat16", "float32", "float64"}


def test_the_runner_names_no_implementation():
    source = inspect.getsource(run)
    for name in impls.registry():
        if name == "fmtsim":
            continue
        assert f'"{name}"' not in source and f"'{name}'" not in source, name
        # nor imports an implementation's module: every one is reached through the registry
        assert f"impls.{name}" not in source and f"impls import {name}" not in source, name


def test_implementations_report_rows_without_importing_the_runner():
    """Row lives below the runner: importing the implementation modules (registry() imports every
    one) leaves run.py unloaded, and torch, torchao and mmasim too (they load when asked for)."""
    code = ("import sys, fmtsim.conformance.impls as r; r.registry(); "
            "print([m in sys.modules for m in ('fmtsim.conformance.run', 'torch', 'torchao', 'mmasim')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[False, False, False, False]"


class _Halving(Implementation):
    """A made-up implementation: E2M1 by truncation (rtz), one named bug on [5, 6)."""

    name = "halving"
    summary = "test double"
    capabilities = ("encode",)
    profiles = ("ocp",)

    def encoders(self, req):
        def enc(x, fmt):
            out = fmtsim.encode(x, fmt, rounding="rtz")
            a = np.abs(x.astype(np.float64))
            out[(a >= 5) & (a < 6)] ^= 1  # the "bug"
            return out

        bug = Divergence("halving.five_to_six", "halving", ("e2m1",), ("float32",), "test",
                         lambda x, f: (np.abs(x.astype(np.float64)) >= 5) & (np.abs(x.astype(np.float64)) < 6))
        return [Adapter("halving", enc, profile="ocp", formats=("e2m1",), options={"rounding": "rtz"},
                        divergences=(bug,))]


def test_adding_an_implementation_is_registering_one_object(monkeypatch):
    monkeypatch.setitem(impls.registry(), "halving", _Halving())
    rows = run.run(("halving",), formats=["e2m1"], big=False)
    assert [r.impl for r in rows] == ["halving"]
    assert rows[0].failed == 0 and rows[0].known.get("halving.five_to_six", 0) > 0
    # without the named divergence the bug is a failure; without the option, rtz is
    broken = _Halving()
    enc = broken.encoders(None)[0]
    monkeypatch.setattr(broken, "encoders", lambda req: [Adapter("halving", enc.encode, "ocp", ("e2m1",),
                                                                 options={"rounding": "rtz"})])
    monkeypatch.setitem(impls.registry(), "halving", broken)
    assert run.run(("halving",), formats=["e2m1"], big=False)[0].failed > 0


def test_an_implementation_that_cannot_run_is_skipped_with_its_reason(monkeypatch, capsys):
    from fmtsim.cli import main

    class Absent(Implementation):
        name = "absent"
        summary = "needs a package nobody has"
        requires = ("no_such_package_fmtsim",)
        install = "pip install nothing"
        capabilities = ("encode",)

    monkeypatch.setitem(impls.registry(), "absent", Absent())
    assert main(["conform", "--impl", "absent", "fmtsim", "--quick", "--formats", "e2m1"]) == 0
    out = capsys.readouterr().out
    assert "skipped absent: the no_such_package_fmtsim package is not installed (pip install nothing)" in out
    assert main(["conform", "--impl", "absent", "--quick"]) == 2
    assert "no_such_package_fmtsim" in capsys.readouterr().err


def test_unknown_implementation_lists_the_registered_ones():
    with pytest.raises(ValueError, match="unknown implementation 'nope'; choose from .*ml_dtypes"):
        run.run(("nope",))


@pytest.mark.parametrize("impl", ["onnx", "gfloat"])
def test_onnx_and_gfloat_conform_on_the_boundary_model(impl):
    if importlib.util.find_spec(impl) is None:
        pytest.skip(f"{impl} is not installed (pip install 'fmtsim[peers]')")
    rows = run.run((impl,), big=False)
    assert rows and sum(r.cases for r in rows) > 10000
    assert sum(r.failed for r in rows) == 0, [(r.impl, r.fmt, r.examples) for r in rows if r.failed]


def test_conform_records_the_version_it_ran(capsys):
    pytest.importorskip("onnx", reason="onnx is not installed (pip install 'fmtsim[peers]')")
    from importlib.metadata import version

    from fmtsim.cli import main

    assert main(["conform", "--impl", "onnx_spec", "--quick", "--formats", "e8m0"]) == 0
    out = capsys.readouterr().out
    v = version("onnx")  # the profiles were read off onnx 1.23: any other version says so
    held = "verified on 1.23" if v.startswith("1.23.") else f"unverified version {v} (profile read off 1.23)"
    assert f"onnx_spec: onnx {v}; onnx_spec_sat {held}; onnx_spec_nosat {held}" in out


def test_a_vendor_implementation_without_headers_says_why(monkeypatch, tmp_path):
    """cuda/hip report the shim's reason (never 'runs') when the vendor's headers are absent."""
    from fmtsim.conformance.impls import hip, registry

    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    monkeypatch.delenv("HIP_PATH", raising=False)
    monkeypatch.setattr(hip, "find_include_dir", lambda: (None, ""))
    hip._lib.cache_clear()  # a shim built earlier in this process would hide the missing headers
    try:
        why = registry()["hip"].missing()
    finally:
        hip._lib.cache_clear()
    assert why is not None and why.startswith("hip: ") and "amd_hip_fp8.h" in why


def _hand_flags_e2m1(x, report_clamp_overflow):
    """E2M1 conversion flags worked out by hand, APFloat's way (1 inexact, 2 underflow, 4 overflow,
    16 invalid): inexact off the grid, underflow when the result is below 1 (the smallest normal),
    a clamp to +-6 an overflow only if asked, invalid for signalling NaNs, +-Inf -> +-0 exact."""
    codes = fmtsim.encode(x, "e2m1", profile="apfloat")
    grid = np.array([0, .5, 1, 1.5, 2, 3, 4, 6])
    with np.errstate(invalid="ignore"):
        v = x.astype(np.float64)
        nan, inf = np.isnan(v), np.isinf(v)
        result = grid[codes & 7]
        inexact = ~nan & ~inf & (np.abs(v) != result)
        bits = x.view(np.uint32) if x.dtype == np.float32 else x.view(np.uint16)
        man = {np.dtype(np.float32): 23, np.dtype(np.float16): 10}.get(x.dtype, 7)
        signaling = nan & ((bits >> (man - 1)) & 1 == 0)
    flags = np.where(inexact, 1, 0) | np.where(inexact & (result < 1), 2, 0) | np.where(signaling, 16, 0)
    if report_clamp_overflow:
        flags |= np.where(~nan & ~inf & (np.abs(v) > 6), 4, 0)
    return codes, flags


def test_conform_compares_flags_where_an_entry_point_reports_them():
    names = ("e2m1",)
    ok = Adapter("hand", lambda x, f: _hand_flags_e2m1(x, False)[0], profile="apfloat", formats=names,
                 sources=("float32", "float16"), with_flags=lambda x, f: _hand_flags_e2m1(x, False), flag_bits=23)
    rows = run.encode_rows(ok, names, big=False)
    flag_rows = [r for r in rows if r.model.endswith(" flags")]
    assert flag_rows and all(r.failed == 0 for r in rows), [(r.model, r.examples) for r in rows if r.failed]
    # the IEEE 754 7.4 overflow flag on a clamp to 6 is not APFloat's convention: the flag rows fail
    ieee = Adapter("hand-ieee", ok.encode, profile="apfloat", formats=names, sources=("float32", "float16"),
                   with_flags=lambda x, f: _hand_flags_e2m1(x, True), flag_bits=23)
    rows = run.encode_rows(ieee, names, big=False)
    bad = [r for r in rows if r.failed]
    assert bad and all(r.model.endswith(" flags") for r in bad)
    assert "flags" in bad[0].examples[0]
