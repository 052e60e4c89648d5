"""LLVM APFloat by version: LLVM 19 has no E8M0; LLVM 20+ converts into Float8E8M0FNU as a
signed precision-1 format with a zero, packed afterwards (policy e8m0_encoding=
'signed_exponent'), read off LLVM 22.1.8. The rule's fast path against its exact twin on every
float16/bfloat16 pattern and the float32/float64 boundaries, the values LLVM 22.1.8 gave,
which variant each version is held to, unverified versions in conform (reported, counted only
under --strict), and conform against every LLVM installed here."""

from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import fmtsim
from fmtsim.cli import main
from fmtsim.conformance import impls
from fmtsim.conformance.adapters import Adapter
from fmtsim.conformance.divergences import Divergence
from fmtsim.conformance.impls import apfloat
from fmtsim.conformance.plugin import Decoder, Implementation, Request
from fmtsim.conformance.run import decode_rows
from fmtsim.oracle import encode_one
from fmtsim.profiles import select

from .conftest import full_run, slow_unless

MODES = ("rne", "rna", "rtz", "rup", "rdn")
INEXACT, UNDERFLOW, OVERFLOW, INVALID = 1, 2, 4, 16


def _f32(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint32).view(np.float32)


# (float32 input, rounding) -> (code, flags), as LLVM 22.1.8's APFloat::convert gave them
# (opStatus as fmtsim's flag bits), 2026-12-03
LLVM22 = [
    (0.0, "rne", 0x00, 0), (-0.0, "rne", 0x00, 0), (1.0, "rne", 0x7F, 0),
    (-1.0, "rne", 0xFF, 0), (-2.0, "rne", 0x80, 0), (-0.5, "rne", 0xFE, 0), (-4.0, "rtz", 0x81, 0),
    (0.75, "rne", 0x7F, INEXACT), (3.0, "rne", 0x81, INEXACT), (6.0, "rne", 0x82, INEXACT),
    (1.5, "rtz", 0x7F, INEXACT), (-3.0, "rne", 0x81, INEXACT), (-3.0, "rup", 0x80, INEXACT),
    (-3.0, "rdn", 0x81, INEXACT), (2.0**-127, "rne", 0x00, 0),
    (2.0**-128, "rne", 0x00, UNDERFLOW | INEXACT), (2.0**-128, "rna", 0x00, INEXACT),
    (2.0**-128, "rup", 0x00, INEXACT), (1.5 * 2.0**-128, "rne", 0x00, INEXACT),
    (1.5 * 2.0**-128, "rtz", 0x00, UNDERFLOW | INEXACT), (2.0**-149, "rna", 0x00, UNDERFLOW | INEXACT),
    (-(2.0**-128), "rne", 0x00, UNDERFLOW | INEXACT), (-(2.0**-128), "rna", 0x80, INEXACT),
    (-(2.0**-130), "rdn", 0x80, INEXACT), (-(2.0**-127), "rne", 0x80, 0),
    (1.5 * 2.0**127, "rne", 0xFF, OVERFLOW | INEXACT), (1.5 * 2.0**127, "rtz", 0xFE, INEXACT),
    (-1.5 * 2.0**127, "rup", 0xFE, INEXACT), (-1.5 * 2.0**127, "rdn", 0xFF, OVERFLOW | INEXACT),
    (np.inf, "rne", 0xFF, INEXACT), (-np.inf, "rtz", 0xFF, INEXACT),
]


@pytest.mark.parametrize("x, rounding, code, flags", LLVM22)
def test_the_llvm20_variant_gives_what_llvm_22_gave(x, rounding, code, flags):
    c, f = fmtsim.encode_with_flags(np.array([x], np.float32), "e8m0", profile="apfloat", rounding=rounding)
    assert (int(c[0]), int(f[0]) & 0x17) == (code, flags)  # 0x17: the flags APFloat reports
    oc, of = encode_one(float(x), "e8m0", src="float32", profile="apfloat", rounding=rounding)
    assert (oc, of & 0x17) == (code, flags)


def test_nans_under_the_llvm20_variant():
    x = _f32(0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001)  # quiet +-, signalling +-
    for r in MODES:
        c, f = fmtsim.encode_with_flags(x, "e8m0", profile="apfloat", rounding=r)
        assert c.tolist() == [0xFF] * 4 and (f & 0x17).tolist() == [0, 0, INVALID, INVALID]


def _boundaries() -> np.ndarray:
    """float32 and float64 values around every E8M0 power of two and midpoint, both signs, the
    ends of the range, zero, the float32 subnormals and Inf."""
    e = np.arange(-160, 140, dtype=np.float64)
    p = np.ldexp(1.0, e.astype(np.int64))
    mids = 1.5 * p
    base = np.concatenate([p, mids, [0.0, np.inf, 2.0**-149, 2.0**-140, 3.4e38, 1e300, 2.0**130]])
    near = [base, np.nextafter(base, np.inf), np.nextafter(base, 0)]
    with np.errstate(over="ignore"):  # beyond float32: Inf, itself a case
        f32 = np.concatenate([b.astype(np.float32) for b in near])
    f32 = np.concatenate([f32, np.nextafter(f32, np.float32(np.inf)), np.nextafter(f32, np.float32(0))])
    return np.concatenate([f32, -f32]).astype(np.float32), np.concatenate([*near, *[-b for b in near]])


@pytest.mark.parametrize("rounding", slow_unless(MODES, keep={"rne"}))
def test_signed_exponent_fast_path_equals_its_exact_twin(rounding):
    """Every float16 and bfloat16 pattern under rne in a full run (every 5th under the other modes,
    every 7th in the README's quick run), and the float32/float64 boundaries, codes and flags."""
    f16 = np.arange(0, 1 << 16, (1 if rounding == "rne" else 5) if full_run() else 7, dtype=np.uint16)
    f32_b, f64_b = _boundaries()
    sources = [("float16", f16.view(np.float16)), ("bfloat16", f16.view(ml_dtypes.bfloat16)),
               ("float32", f32_b), ("float64", f64_b)]
    for src, x in sources:
        if src in ("float16", "bfloat16"):
            x = x[~np.isnan(x.astype(np.float32))]  # NaNs: test_nans_under_the_llvm20_variant
        c, f = fmtsim.encode_with_flags(x, "e8m0", profile="apfloat", rounding=rounding)
        want = [encode_one(float(v), "e8m0", src=src, profile="apfloat", rounding=rounding) for v in x]
        assert c.tolist() == [w[0] for w in want], src
        assert f.tolist() == [w[1] for w in want], src


def test_signed_exponent_refuses_sr():
    with pytest.raises(ValueError, match="not sr"):
        fmtsim.encode(np.ones(2, np.float32), "e8m0", profile="apfloat", rounding="sr",
                      rbits=np.zeros(2, np.uint32))


# --- which variant each version is held to -------------------------------------------------------

@pytest.mark.parametrize("version, read_off, verified", [
    ("19.1.7", "19.1.7", True), ("19.1.0", "19.1.7", True), ("22.1.8", "22.1.8", True), ("22.1.0", "22.1.8", True),
    ("20.1.8", "22.1.8", False), ("21.1.0", "22.1.8", False), ("23.0.0", "22.1.8", False),
    ("18.1.8", "19.1.7", False)])
def test_each_llvm_version_is_held_to_its_variant(version, read_off, verified):
    sel = select("apfloat", version)
    assert sel.variant.provenance.version == read_off and sel.verified is verified
    has_e8m0 = "e8m0" in sel.variant.rules
    assert has_e8m0 is (read_off == "22.1.8")


def test_llvm_19_has_no_e8m0_entry_points(monkeypatch):
    monkeypatch.setattr(apfloat, "find_llvm_config", lambda: ("/usr/bin/llvm-config-19", ""))
    monkeypatch.setattr(apfloat, "_version", lambda config: "19.1.7")
    ap = apfloat.Apfloat()
    monkeypatch.setattr(apfloat.Apfloat, "missing", lambda self: None)
    req = Request(tuple(fmtsim.FORMATS), None, None, False, big=False)
    assert "e8m0" not in ap.decoders(req)[0].formats
    assert all("e8m0" not in e.formats for e in ap.encoders(req))
    # the recorded description (the generated docs) is the same whatever LLVM is here
    rec = Request(tuple(fmtsim.FORMATS), None, None, False, big=False, recorded=True)
    assert all("e8m0" in e.formats for e in ap.encoders(rec))


# --- unverified versions in conform --------------------------------------------------------------

class _FakeLLVM(Implementation):
    """An APFloat of a given version whose E8M0 entry point is the OCP rule (what a wrong profile
    would give): it fails the LLVM 20+ variant's E8M0 rule on negatives, zero and ties."""

    name = "fakellvm"
    capabilities = ("encode",)
    profiles = ("apfloat",)

    def __init__(self, version: str):
        self._version = version

    def version(self) -> str:
        return f"LLVM {self._version}"

    def profile_version(self) -> str | None:
        return self._version

    def encoders(self, req):
        return [Adapter("fakellvm[rne]", lambda x, f: fmtsim.encode(x, f), profile="apfloat", formats=("e8m0",),
                        sources=("float32",), options={"rounding": "rne"})]


@pytest.mark.parametrize("version, strict, rc", [("21.1.0", False, 0), ("21.1.0", True, 1), ("22.1.8", False, 1)])
def test_failures_on_an_unverified_version_are_shown_and_counted_only_under_strict(version, strict, rc, monkeypatch,
                                                                                  capsys):
    monkeypatch.setitem(impls.registry(), "fakellvm", _FakeLLVM(version))
    argv = ["conform", "--impl", "fakellvm", "--quick", "--formats", "e8m0"] + (["--strict"] if strict else [])
    assert main(argv) == rc
    out = capsys.readouterr().out
    assert "FAIL fakellvm[rne] e8m0" in out
    if version == "21.1.0":
        assert "FAIL fakellvm[rne] e8m0 encode_ties (unverified): " in out
        assert "unverified: fakellvm[rne]: unverified version 21.1.0 (profile read off LLVM APFloat::convert, " \
               "compiled against llvm-22-dev 22.1.8, 2026-12-03)" in out
        assert "of them on unverified versions" in out
    else:
        assert "unverified" not in out.split("\n\n")[-1]


def test_a_decoder_divergence_is_counted_as_known():
    """LLVM 20+ decodes E8M0 0xFF as +Inf: inside the named divergence, every other code held."""
    def llvm_like(codes, fmt):
        v = fmtsim.decode(codes, fmt, np.float32)
        return np.where(codes == 0xFF, np.float32(np.inf), v)

    dec = Decoder("x", llvm_like, ("e8m0",), divergences=apfloat.DIVERGENCES)
    (row,) = decode_rows(dec, ("e8m0",))
    assert (row.cases, row.passed, row.failed, row.known) == (256, 255, 0, {"apfloat.e8m0_ff_decodes_inf": 1})
    wrong = Decoder("y", lambda c, f: np.where(c == 0x7F, np.float32(2.0), llvm_like(c, f)), ("e8m0",),
                    divergences=(Divergence("d", "y", ("e8m0",), ("codes",), "0xFF", apfloat._code_ff),))
    (row,) = decode_rows(wrong, ("e8m0",))
    assert row.failed == 1 and "code 0x7f" in row.examples[0]


# --- every LLVM installed here -------------------------------------------------------------------

def _installed() -> list[tuple[str, str]]:
    out = []
    for c in apfloat.llvm_config_candidates():
        v = apfloat.llvm_version(c)
        if v and int(v.split(".")[0]) >= apfloat.MIN_MAJOR and v not in [w for _, w in out]:
            out.append((c, v))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("config, llvm", _installed() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no llvm-config of LLVM 19 or newer here (apt-get install llvm-19-dev llvm-22-dev)"))])
def test_conform_passes_with_every_llvm_installed(config, llvm, tmp_path):
    if apfloat.find_compiler() is None:
        pytest.skip("no C++ compiler here: the APFloat shim cannot be built")
    env = {**os.environ, "FMTSIM_LLVM_CONFIG": config}
    r = subprocess.run([sys.executable, "-m", "fmtsim", "conform", "--impl", "apfloat", "--strict"],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"apfloat: LLVM {llvm}; " in r.stdout
    assert " unverified" not in r.stdout.split("golden vectors")[-1].split("\n")[1]
    e8m0_rows = [ln for ln in r.stdout.splitlines() if ln.startswith("apfloat") and " e8m0 " in ln]
    assert bool(e8m0_rows) is (int(llvm.split(".")[0]) >= 20)


def test_a_user_adapter_claiming_a_versioned_profile_is_held_and_counted(tmp_path, capsys):
    """A user's adapter has no version of its own: its claimed profile is held (the default
    variant) and its failures fail the run; "unverified" is for a known version only."""
    (tmp_path / "mine.py").write_text(
        "import fmtsim\n"
        "def enc(x, fmt):\n"
        "    return fmtsim.encode(x, fmt)  # OCP rules, not LLVM 20+'s E8M0\n"
        "enc.profile = 'apfloat'\n"
        "enc.formats = ('e8m0',)\n")
    rc = main(["conform", "--impl", f"{tmp_path / 'mine.py'}:enc", "--quick", "--formats", "e8m0"])
    out = capsys.readouterr().out
    assert rc == 1 and "unverified" not in out, out[-2000:]
