"""The per-unit GEMM vector files (vectors/*.gemm.bin): their D against MMA-Sim and the
Fraction twin, ``fmtsim ver`` bit for bit, and the model-family tolerance."""

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from fmtsim.cli import main
from fmtsim.conformance.gemm_vectors import GEMM_CASES, gemm_name, ulps_apart
from fmtsim.conformance.vectors import _unpack_arrays
from fmtsim.mma import UNITS, matmul, slow_matmul
from fmtsim.mma.slow import fl32
from fmtsim.mma.tolerance import family_bound, in_family
from fmtsim.mma.units import get_unit

from .conftest import slow_unless

VEC = Path(__file__).resolve().parent.parent / "vectors"
MANIFEST = json.loads((VEC / "manifest.json").read_text())
FILES = [gemm_name(*c) for c in GEMM_CASES]
FIRST = set(FILES[:6])  # the first units' files run in the fast tier, the others with --full
TIERED = slow_unless(FILES, keep=FIRST)
# the fma units' files carry the FMA-chain bound, not the family's: tests/test_mma_fma.py
FAMILY = slow_unless([f for f in FILES if UNITS[f.split(".")[0]].family != "fma"], keep=FIRST)


def load(name):
    meta = MANIFEST["files"][name]
    return meta, _unpack_arrays((VEC / name).read_bytes(), meta, name)


def kwargs(meta, t):
    return dict(a_format=meta["a_format"], b_format=meta["b_format"], a_scales=t.get("a_scales"),
                b_scales=t.get("b_scales"), scale_format=meta["scale_format"], block_size=meta["block_size"])


def test_every_named_unit_has_a_file():
    units = {MANIFEST["files"][f]["unit"]["name"] for f in FILES}
    assert units == set(UNITS)
    assert all(MANIFEST["files"][f]["operation"] == "unit_gemm" for f in FILES)


@pytest.mark.parametrize("name", TIERED)
def test_d_matches_the_fraction_twin(name):
    meta, t = load(name)
    slow = slow_matmul(t["a_codes"], t["b_codes"], t["c"], unit=meta["unit"]["name"], **kwargs(meta, t),
                       outputs=[(i, j) for i in range(0, 16, 3) for j in range(8)])
    for i in range(0, 16, 3):
        assert np.array_equal(slow[i].view(np.uint32), t["d"][i].view(np.uint32)), (name, i)


@pytest.mark.parametrize("name", slow_unless([f for f in FILES if not f.startswith("exact")], keep=FIRST))
def test_d_matches_mmasim(name):
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from fmtsim.conformance.impls import mmasim

    meta, t = load(name)
    cfg = mmasim.Config(meta["unit"]["name"], meta["a_format"], meta["b_format"], meta["scale_format"],
                           meta["block_size"])
    sh = 13 if meta["a_format"] == "tf32" else 0  # tf32 codes reach MMA-Sim as the fp32 patterns they stand for
    a, b = t["a_codes"].astype(np.int64) << sh, t["b_codes"].astype(np.int64) << sh
    theirs = mmasim.run_mmasim(cfg, a, b, t["c"], t.get("a_scales"), t.get("b_scales"))
    u = f"u{theirs.itemsize}"  # uint64 patterns for the fp64 units' D
    same = (theirs.view(u) == t["d"].view(u)) | (np.isnan(theirs) & np.isnan(t["d"]))
    known = mmasim.explain_mma(cfg.unit, t["d"], theirs, {"case": (t["a_codes"], t["b_codes"]), "cfg": cfg})
    for mask in known.values():
        same |= mask
    assert same.all(), np.argwhere(~same)


def test_exact_file_is_one_rounding():
    meta, t = load(gemm_name("exact", "e4m3", "e4m3", None, None))
    from fmtsim.mma.arith import operand_table

    tab = operand_table("e4m3")
    for i in (0, 5, 8, 12):
        for j in range(8):
            if np.isnan(t["d"][i, j]):
                continue
            s = Fraction(float(t["c"][i, j])) + sum(Fraction(float(tab.values[x])) * Fraction(float(tab.values[y]))
                                                    for x, y in zip(t["a_codes"][i], t["b_codes"][:, j],
                                                                    strict=True))
            assert t["d"][i, j] == fl32(s)


def test_ver_is_bit_for_bit(tmp_path, capsys):
    name = gemm_name("sm90_wgmma_fp8", "e4m3", "e4m3", None, None)
    meta, t = load(name)
    raw = bytearray((VEC / name).read_bytes())
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 0
    # one ulp off in one output: a failure naming the output and the ulps
    d_off = next(a["offset"] for a in meta["arrays"] if a["name"] == "d")
    i, j = 5, 2
    pos = d_off + 4 * (i * 8 + j)
    v = int.from_bytes(raw[pos:pos + 4], "little") + 1
    raw[pos:pos + 4] = v.to_bytes(4, "little")
    p.write_bytes(bytes(raw))
    capsys.readouterr()
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 1
    out = capsys.readouterr().out
    assert "D[5, 2]" in out and "1 ulp apart" in out
    # the same output is within the family tolerance
    assert main(["ver", name, str(p), "--vectors", str(VEC), "--family-tolerance"]) == 0


def _units_taking(meta):
    for u in UNITS.values():
        if not (u.takes(meta["a_format"]) and u.takes(meta["b_format"])):
            continue
        if meta["scale_format"] and not (meta["scale_format"] in u.scale_formats
                                         and meta["block_size"] in u.block_sizes):
            continue
        if not meta["scale_format"] and u.scaled and u.family != "exact":
            continue
        if meta["scale_format"] == "ue4m3" and u.family == "nv_grouped" and meta["block_size"] != 16:
            continue
        if not in_family(u) or (u.c_format == "fp16" and meta["unit"].get("c_format") != "fp16"):
            continue
        yield u


@pytest.mark.parametrize("name", FAMILY)
def test_every_named_unit_passes_the_family_tolerance_and_more_fails(name):
    meta, t = load(name)
    bound, ref = t["d_bound"].astype(np.float64), t["d_exact"].astype(np.float64)
    units = list(_units_taking(meta))
    assert units
    for u in units:
        k = np.asarray(t["a_codes"]).shape[1] * (2 if meta["a_format"] == "e2m1" else 1)
        # split_k 2 only where K holds two of the unit's steps (matmul refuses more slices than that)
        for extra in ({}, {"promote_every": u.k} if u.k else {}, {"split_k": 2} if u.k and k >= 2 * u.k else {}):
            d = matmul(t["a_codes"], t["b_codes"], t["c"], unit=u.name, **kwargs(meta, t), **extra)
            with np.errstate(invalid="ignore"):
                ok = np.where(np.isnan(bound),
                              (d.view(np.uint32) == t["d_exact"].view(np.uint32)) | (np.isnan(d) & np.isnan(ref)),
                              np.isinf(bound) | (np.abs(d - ref) <= bound))
            assert ok.all(), (u.name, extra, np.argwhere(~ok)[:3])
    # an output off by more than the bound fails; the bound holds the exact sum's rounding too
    fin = np.isfinite(bound) & np.isfinite(ref)
    assert fin.sum() > 50
    with np.errstate(invalid="ignore", over="ignore"):
        beyond = (ref + 1.01 * bound + np.abs(ref) * 2.0**-22 + 2.0**-140).astype(np.float32)
        assert not (np.abs(beyond.astype(np.float64) - ref) <= bound)[fin].any()
    # and the recomputed bound is the stored one (rounded up to float32)
    again = family_bound(t["a_codes"], t["b_codes"], t["c"], meta["a_format"], meta["b_format"], t.get("a_scales"),
                         t.get("b_scales"), meta["scale_format"], meta["block_size"])
    assert np.array_equal(np.isnan(again), np.isnan(bound))
    with np.errstate(invalid="ignore"):
        assert (bound[fin] >= again[fin]).all()


def test_ulps_apart():
    one = np.float32(1.0)
    assert ulps_apart(one, np.nextafter(one, np.float32(2))) == 1
    assert ulps_apart(np.float32(-0.0), np.float32(0.0)) == 0
    assert ulps_apart(np.float32(-1e-45), np.float32(1e-45)) == 2


@pytest.mark.parametrize("name,elem,sf,bs,units", [
    ("mxfp8_e4m3.floor.rne.dot.bin", "e4m3", "e8m0", 32, ["exact", "sm100_mxf8f6f4"]),
    ("mxfp4.floor.rne.dot.bin", "e2m1", "e8m0", 32, ["exact", "sm100_mxf8f6f4", "sm100_mxf4", "sm100_mxf4nvf4"]),
    ("nvfp4.te.dot.bin", "e2m1", "ue4m3", 16, ["exact", "sm100_mxf4nvf4"])])
def test_dot_files_take_the_family_bound(name, elem, sf, bs, units, tmp_path):
    """The block-scaled dot files' c_bound is the family tolerance: every named unit that
    runs these operands (split-K included) lands inside, and an output beyond fails."""
    from fmtsim.layout import unpack_fp4

    meta = MANIFEST["files"][name]
    t = _unpack_arrays((VEC / name).read_bytes(), meta, name)
    unpack = unpack_fp4 if elem == "e2m1" else (lambda v: v)
    a, b = unpack(t["a_codes"]), unpack(t["b_codes"]).T
    alpha = 1.0
    if "a_global_scale" in t:
        alpha = np.float32(float(t["a_global_scale"][0]) * float(t["b_global_scale"][0]))
    bound, c = t["c_bound"].astype(np.float64), t["c"].astype(np.float64)
    for unit in units:
        step = get_unit(unit).k
        for extra in ({}, {"split_k": 2}) if unit != "exact" and a.shape[1] >= 2 * step else ({},):
            acc = matmul(a, b, unit=unit, a_format=elem, b_format=elem, a_scales=t["a_scales"],
                         b_scales=t["b_scales"].T, scale_format=sf, block_size=bs, **extra)
            d = (np.float32(alpha) * acc).astype(np.float32)
            assert (np.abs(d - c) <= bound).all(), (unit, extra)
    # ver: c itself passes, an output just beyond its bound fails
    raw = bytearray((VEC / name).read_bytes())
    off = next(x["offset"] for x in meta["arrays"] if x["name"] == "c")
    beyond = np.float32(c[3, 4] + 1.5 * bound[3, 4] + abs(c[3, 4]) * 2.0**-22)
    raw[off + 4 * (3 * 8 + 4): off + 4 * (3 * 8 + 5)] = beyond.tobytes()
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    assert main(["ver", name, str(p), "--vectors", str(VEC)]) == 1
