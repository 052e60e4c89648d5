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
         ("sm100_mxf4nvf4", "nvfp4")]

KEYS = {"exact": ("family",), "nv": ("family", "k", "fraction_bits", "output", "e_zero"),
        "nv_grouped": ("family", "k", "fraction_bits", "output", "e_zero", "group"),
        "amd": ("family", "k", "fraction_bits", "fraction_bits2", "even_odd", "drop_small_c", "output")}


def test_every_named_unit_has_a_probe_case():
    assert {u for u, _ in CASES} == set(UNITS)


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


@pytest.mark.parametrize("unit,name", slow_unless(CASES, keep={("sm90_wgmma_fp8", "fp8"), ("sm100_f8f6f4", "fp4")}))
def test_probe_recovers_every_named_unit(unit, name):
    p = probe.gen(name)
    _check(probe.infer(name, probe.simulate(unit, name, p), p), unit)


MMASIM = [("sm90_wgmma_fp8", "fp8"), ("sm89_mma_fp8", "fp8"), ("sm100_f8f6f4", "fp4"), ("cdna3_mfma_fp8", "fp8fnuz"),
          ("sm90_wgmma_fp16", "fp16"), ("cdna3_mfma_fp16", "bf16"), ("sm100_mxf8f6f4", "mxfp8"),
          ("sm100_mxf4", "mxfp4"), ("sm100_mxf4nvf4", "nvfp4")]


@pytest.mark.parametrize("unit,name", slow_unless(MMASIM, keep={("sm90_wgmma_fp8", "fp8")}))
def test_probe_recovers_mmasim_instructions(unit, name):
    pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")
    from fmtsim.conformance import mma_peers

    ps = probe.PROBE_SETS[name]
    p = probe.gen(name)
    cfg = mma_peers.Config(unit, ps.a_format, ps.b_format, ps.scale_format, ps.block_size)
    d = mma_peers.run_mmasim(cfg, p["a"], p["b"], p["c"], p.get("a_scales"), p.get("b_scales"))
    if unit.startswith("cdna3"):  # mmasim.amd_signed_zero: MMA-Sim's -0.0 where fmtsim writes +0
        d = np.where(d == 0, np.float32(0), d).astype(np.float32)
    _check(probe.infer(name, d, p), unit)


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
