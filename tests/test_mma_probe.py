"""fmtsim probe: every named unit is recovered exactly from its probe outputs (fmtsim's
models and MMA-Sim's instructions), and the CLI round trip."""

import numpy as np
import pytest

from fmtsim.cli import main
from fmtsim.mma import UNITS, probe

from .conftest import slow_unless

CASES = [("sm90_wgmma_fp8", "fp8"), ("sm89_mma_fp8", "fp8"), ("sm100_f8f6f4", "fp8"), ("exact", "fp8"),
         ("sm90_wgmma_fp16", "fp16"), ("sm90_wgmma_fp16", "bf16"), ("cdna3_mfma_fp16", "fp16"),
         ("cdna3_mfma_fp16", "bf16"), ("cdna3_mfma_fp8", "fp8fnuz"), ("sm100_f8f6f4", "fp4"),
         ("sm100_mxf8f6f4", "mxfp8"), ("sm100_mxf4", "mxfp4"), ("sm100_mxf4nvf4", "mxfp4"),
         ("sm100_mxf4nvf4", "nvfp4"),
         ("sm70_mma_fp16", "fp16"), ("sm70_mma_fp16_c16", "fp16_f16"), ("sm70_mma_fp16_f16", "fp16_f16"),
         ("sm75_mma_fp16", "fp16"), ("sm75_mma_fp16_f16", "fp16_f16"), ("sm80_mma_fp16", "bf16"),
         ("sm80_mma_fp16_f16", "fp16_f16"), ("sm80_mma_tf32", "tf32"), ("sm89_mma_fp8_f16", "fp8_f16"),
         ("sm90_mma_fp16", "fp16"), ("sm90_mma_fp16_k8", "bf16"), ("sm90_mma_fp16_f16", "fp16_f16"),
         ("sm90_mma_fp16_f16_k8", "fp16_f16"), ("sm90_mma_tf32", "tf32"), ("sm90_mma_tf32_k4", "tf32"),
         ("sm90_wgmma_fp16_f16", "fp16_f16"), ("sm90_wgmma_tf32", "tf32"), ("sm90_wgmma_fp8_f16", "fp8_f16"),
         ("sm100_tf32", "tf32"), ("sm100_f16", "fp16"), ("sm100_f16_f16", "fp16_f16"),
         ("sm100_f8f6f4_f16", "fp8_f16"), ("sm120_f8f6f4", "fp4"), ("sm120_f8f6f4_f16", "fp8_f16"),
         ("sm120_mma_fp8_k16", "fp8"), ("sm120_mma_fp8_k16_f16", "fp8_f16"), ("sm120_mxf8f6f4", "mxfp8"),
         ("sm120_mxf4", "mxfp4"), ("sm120_mxf4nvf4", "sm120_mxf4nvf4"), ("cdna1_mfma_fp16", "fp16"),
         ("cdna1_mfma_bf16", "bf16"), ("cdna2_mfma_fp16", "fp16"), ("cdna2_mfma_bf16", "bf16"),
         ("cdna3_mfma_fp16_k4", "fp16"), ("cdna3_mfma_xf32", "tf32")]

KEYS = {"exact": ("family", "k"), "ftz": ("family", "k"), "nv": ("family", "k", "fraction_bits", "output", "e_zero"),
        "nv_grouped": ("family", "k", "fraction_bits", "output", "e_zero", "group"),
        "amd": ("family", "k", "fraction_bits", "fraction_bits2", "even_odd", "drop_small_c", "output")}


def test_every_named_unit_has_a_probe_case():
    # the fma units (fp32 / fp64 FMA chains) have no place in the probe's grid of fused
    # dot-product steps over code tables: none of its parameters is theirs (docs/matrix_units.md)
    fma = {n for n, u in UNITS.items() if u.family == "fma"}
    assert fma and {u for u, _ in CASES} == set(UNITS) - fma


def _check(inf, unit):
    u = UNITS[unit]
    assert unit in inf.named
    assert inf.consistent, inf.report()
    feats = inf.features()
    for key in KEYS[u.family]:
        if key in probe.unobservable(inf.probe_set):
            assert feats[key].startswith("not observable")
        else:
            assert feats[key] == str(getattr(u, key)), (key, feats[key], inf.report())


@pytest.mark.parametrize("unit,name", slow_unless(CASES, keep={("sm90_wgmma_fp8", "fp8")}))
def test_probe_recovers_every_named_unit(unit, name):
    p = probe.gen(name)
    _check(probe.infer(name, probe.simulate(unit, name, p), p), unit)


MMASIM = [("sm90_wgmma_fp8", "fp8"), ("sm89_mma_fp8", "fp8"), ("sm100_f8f6f4", "fp4"), ("cdna3_mfma_fp8", "fp8fnuz"),
          ("sm90_wgmma_fp16", "fp16"), ("cdna3_mfma_fp16", "bf16"), ("sm100_mxf8f6f4", "mxfp8"),
          ("sm100_mxf4", "mxfp4"), ("sm100_mxf4nvf4", "nvfp4"), ("sm80_mma_fp16_f16", "fp16_f16"),
          ("sm90_mma_tf32", "tf32"), ("cdna2_mfma_bf16", "bf16"), ("cdna1_mfma_fp16", "fp16"),
          ("sm120_mxf4nvf4", "sm120_mxf4nvf4")]


@pytest.mark.parametrize("unit,name", slow_unless(MMASIM, keep={("sm90_wgmma_fp8", "fp8")}))
def test_probe_recovers_mmasim_instructions(unit, name):
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from fmtsim.conformance.impls import mmasim

    ps = probe.PROBE_SETS[name]
    p = probe.gen(name)
    cfg = mmasim.Config(unit, ps.a_format, ps.b_format, ps.scale_format, ps.block_size)
    shift = 13 if ps.a_format == "tf32" else 0  # tf32 reaches MMA-Sim as fp32 patterns
    d = mmasim.run_mmasim(cfg, p["a"] << shift, p["b"] << shift, p["c"], p.get("a_scales"), p.get("b_scales"))
    if unit.startswith("cdna"):  # mmasim.amd_signed_zero: MMA-Sim's -0.0 where fmtsim writes +0
        d = np.where(d == 0, np.float32(0), d).astype(np.float32)
    _check(probe.infer(name, d, p), unit)


def _question_rows(p):
    """The sm_120 question's F rows: C = 1, -1 in block 0 and +1 in block 1 (scale 2^-d)."""
    one, minus = 0x2, 0xA  # E2M1 1.0 and -1.0
    a = p["a"]
    sel = (a[:, 0] == minus) & (a[:, 32] == one) & (p["c"][:, 0] == 1)
    return np.nonzero(sel)[0], 127 - p["a_scales"][sel, 1].astype(int)


def test_sm120_probe_set_separates_the_hypotheses():
    """MMA-Sim's model of sm_120's block-scaled FP4 mma (groups of 16 exact, F=35) and the
    hardware probe's 25 bits give different outputs on the set, and so do grouped and
    ungrouped summation at either F; on the F rows the 2^-d term survives exactly while d <= F."""
    name = "sm120_mxf4nvf4"
    p = probe.gen(name)
    outs = {k: probe.simulate(u, name, p) for k, u in probe.SM120_HYPOTHESES.items()}
    keys = list(outs)
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            assert probe._differ(outs[x], outs[y]) > 0, (x, y)
    rows, d = _question_rows(p)
    assert set(range(20, 40)) <= set(d.tolist())
    for key, f in (("mmasim", 35), ("probe25", 25), ("grouped25", 25), ("ungrouped35", 35)):
        got = outs[key][rows, 0].astype(np.float64)
        assert np.array_equal(got, np.where(d <= f, 2.0 ** -d, 0.0)), key
    # the named unit is MMA-Sim's model
    assert np.array_equal(probe.simulate("sm120_mxf4nvf4", name, p).view(np.uint32), outs["mmasim"].view(np.uint32))


@pytest.mark.slow
@pytest.mark.parametrize("hypothesis", list(probe.SM120_HYPOTHESES))
def test_sm120_infer_recovers_each_hypothesis(hypothesis):
    name = "sm120_mxf4nvf4"
    u = probe.SM120_HYPOTHESES[hypothesis]
    p = probe.gen(name)
    inf = probe.infer(name, probe.simulate(u, name, p), p)
    assert len(inf.consistent) == 1, inf.report()
    feats = inf.features()
    assert (feats["family"], feats["fraction_bits"], feats["k"]) == (u.family, str(u.fraction_bits), str(u.k))
    assert ("sm120_mxf4nvf4" in inf.named) == (hypothesis == "mmasim")


def test_probe_cli_round_trip(tmp_path, capsys):
    assert main(["probe", "gen", "--set", "fp8", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "probe.fp8.bin").exists() and (tmp_path / "probe.json").exists()
    p = probe.gen("fp8")
    d = probe.simulate("sm89_mma_fp8", "fp8", p)
    (tmp_path / "probe.fp8.d.bin").write_bytes(d.astype("<f4").tobytes())
    capsys.readouterr()
    assert main(["probe", "infer", str(tmp_path / "probe.fp8.d.bin"), "--probes", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "matches named unit(s): sm89_mma_fp8" in out and "fraction_bits: 13" in out
    # one output one ulp off: no candidate, the nearest named unit and where it differs
    d[7, 1] = np.nextafter(d[7, 1], np.float32(np.inf))
    (tmp_path / "probe.fp8.d.bin").write_bytes(d.astype("<f4").tobytes())
    assert main(["probe", "infer", str(tmp_path / "probe.fp8.d.bin")]) == 1
    out = capsys.readouterr().out
    assert "sm89_mma_fp8: 1 outputs differ (first at flat index 29)" in out
    assert main(["probe", "gen", "--set", "fp7", "-o", str(tmp_path)]) == 2
    assert "unknown probe set 'fp7'" in capsys.readouterr().err
    (tmp_path / "short.bin").write_bytes(b"\0" * 8)
    assert main(["probe", "infer", str(tmp_path / "short.bin"), "--set", "fp8"]) == 2
    assert "needs" in capsys.readouterr().err


def test_probe_infer_exits_1_when_only_an_unnamed_candidate_matches(tmp_path, capsys):
    """A kernel that some candidate of the grid reproduces but no named unit does (here one with
    more fraction bits than any NVIDIA FP8 unit) is a finding, not a pass: exit 1."""
    p = probe.gen("fp8")
    named = {(u.family, u.k, u.fraction_bits, u.output) for u in UNITS.values()}
    odd = next(u for u in probe.candidates("fp8") if (u.family, u.k, u.fraction_bits, u.output) not in named)
    d = probe.simulate(odd, "fp8", p)
    (tmp_path / "probe.fp8.d.bin").write_bytes(d.astype("<f4").tobytes())
    assert main(["probe", "infer", str(tmp_path / "probe.fp8.d.bin"), "--set", "fp8"]) == 1
    out = capsys.readouterr().out
    assert "candidate(s) reproduce every output bit for bit" in out and "matches no named unit" in out
