"""fmtsim.mma against MMA-Sim (the ``mmasim`` built-in implementation of fmtsim conform;
CI installs mmasim 2.1.1 through the ``mma`` extra)."""

from dataclasses import replace

import numpy as np
import pytest

from fmtsim.mma import UNITS, units

pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[mma]')")
pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")

from fmtsim.conformance import mma_peers  # noqa: E402
from fmtsim.conformance.run import run  # noqa: E402


def test_every_unit_mmasim_has_conforms_with_only_named_divergences():
    rows = mma_peers.mmasim_rows(big=False)
    bad = [(r.fmt, r.model, r.examples) for r in rows if r.failed]
    assert not bad, bad
    assert {r.fmt.split()[0] for r in rows} == set(UNITS) - {"exact"}
    assert {r.model for r in rows} == set(mma_peers.MODELS)
    # every named divergence is real: it shows on the coverage models
    seen = {name for r in rows for name in r.known}
    assert seen == {d.name for d in mma_peers.MMA_DIVERGENCES}
    # and the divergences cover little: below 1 % of the outputs
    assert sum(sum(r.known.values()) for r in rows) < 0.01 * sum(r.cases for r in rows)


def test_conform_runs_mmasim_by_unit_name():
    rows = run(("mmasim",), formats=["sm100_mxf4nvf4"], big=False)
    assert rows and all(r.fmt.startswith("sm100_mxf4nvf4") for r in rows)
    assert sum(r.failed for r in rows) == 0 and sum(r.cases for r in rows) > 1000


@pytest.mark.parametrize("unit,change", [("sm90_wgmma_fp8", dict(fraction_bits=14)),
                                          ("sm100_mxf4", dict(e_zero=-100)),
                                          ("cdna3_mfma_fp8", dict(even_odd=False)),
                                          ("sm89_mma_fp8", dict(k=32))])
def test_a_wrong_unit_record_is_caught(monkeypatch, unit, change):
    """The comparison can fail: one parameter off and MMA-Sim disagrees."""
    monkeypatch.setitem(units._BY_NAME, unit, replace(UNITS[unit], **change))  # UNITS itself is read-only
    rows = mma_peers.mmasim_rows([unit], big=False)
    assert sum(r.failed for r in rows) > 0


def test_mmasim_fp4_packing_is_high_nibble_first(rng):
    """mxf4 operands reach MMA-Sim with the first element in the high nibble; packing A low
    nibble first (the memory order of OCP / PyTorch) while B stays high first pairs the
    wrong elements and gives different results."""
    import torch

    cfg = mma_peers.Config("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32)
    a = rng.integers(0, 16, (4, 64))
    b = rng.integers(0, 16, (64, 8))
    c = np.zeros((4, 8), np.float32)
    sa, sb = np.full((4, 2), 127), np.full((2, 8), 127)
    same, ours, _ = mma_peers.compare(cfg, (a, b, c, sa, sb))
    assert same.all()
    op = mma_peers._instruction(cfg)

    def low_first(x):
        x = x.astype(np.uint8)
        return torch.from_numpy(np.ascontiguousarray(x[..., 0::2] | (x[..., 1::2] << 4)))
    wrong = op(low_first(a), mma_peers._pack_high_first(b.T).T, torch.from_numpy(c.copy()),
               mma_peers._torch_scales(sa, "e8m0"), mma_peers._torch_scales(sb, "e8m0")).numpy()
    assert not np.array_equal(wrong.view(np.uint32), ours.view(np.uint32))


def test_hopper_fp8_falls_outside_the_old_dot_tolerance(rng):
    """The reason for the units: a K * 2^-24 * sum|a b| bound around the exact answer rejects
    correct Hopper FP8 output (m64n8k32, e4m3, random finite operands)."""
    from fmtsim.mma import matmul
    from fmtsim.mma.arith import operand_table

    t = operand_table("e4m3")
    fin = np.nonzero(t.cls == 0)[0]
    a = rng.choice(fin, (64, 32))
    b = rng.choice(fin, (32, 8))
    hop = matmul(a, b, unit="sm90_wgmma_fp8", a_format="e4m3", b_format="e4m3").astype(np.float64)
    ex = matmul(a, b, unit="exact", a_format="e4m3", b_format="e4m3").astype(np.float64)
    bound = 32 * 2.0**-24 * (np.abs(t.values[a]) @ np.abs(t.values[b]))
    assert (np.abs(hop - ex) > bound).mean() > 0.3
