"""fmtsim.mma against MMA-Sim (the ``mmasim`` built-in implementation of fmtsim conform;
CI installs mmasim 2.1.1 through the ``mma`` extra)."""

from dataclasses import replace

import numpy as np
import pytest

from fmtsim.mma import UNITS, units

pytest.importorskip("torch", reason="torch is not installed (pip install 'fmtsim[mma]')")
pytest.importorskip("mmasim", reason="mmasim is not installed (pip install 'fmtsim[mma]')")

from fmtsim.conformance.impls import mmasim  # noqa: E402
from fmtsim.conformance.run import run  # noqa: E402


def _divergences(group: tuple[str, ...]) -> set[str]:
    """The named divergences that name a unit of ``group``."""
    return {d.name for d in mmasim.MMA_DIVERGENCES if set(d.units) & set(group)}


def _unit_groups() -> list[tuple[str, ...]]:
    """The units MMA-Sim is compared on (all but "exact"), in groups xdist can spread over its
    workers: the units of a named divergence share a group (joined through the divergences they
    share), so one group's test sees every unit a divergence can show on; every other unit is a
    group of its own."""
    group = {u: {u} for u in set(UNITS) - {"exact"}}
    for d in mmasim.MMA_DIVERGENCES:
        joined = set().union(*(group.setdefault(u, {u}) for u in d.units))
        for u in joined:
            group[u] = joined
    return sorted({tuple(sorted(g)) for g in group.values()})


def _outputs(units) -> int:
    """How many D elements mmasim_rows(units, big=False) compares: one M x N case of every config of
    those units and every model that applies to it."""
    return sum(m * n for c in mmasim.CONFIGS if c.unit in units
               for m, n, _ in [mmasim._shape(UNITS[c.unit], big=False)]
               for name in mmasim.MODELS if mmasim.applies(name, c))


UNIT_GROUPS = _unit_groups()
ALL_OUTPUTS = _outputs(set(UNITS) - {"exact"})
# the groups an arithmetic divergence (all but mmasim.nan_payload) can show in: they share its 1 % budget
_ARITH_GROUPS = [g for g in UNIT_GROUPS if _divergences(g) - {"mmasim.nan_payload"}]


def test_unit_groups_add_up_to_one_run_over_every_unit():
    """The groups of the test below split the one run they replace, and nothing falls out: every
    unit but exact once, every config's unit among them, every model and every named divergence
    in some group, and the groups' outputs add up to all outputs."""
    units = [u for g in UNIT_GROUPS for u in g]
    assert sorted(units) == sorted(set(UNITS) - {"exact"})
    assert {c.unit for c in mmasim.CONFIGS} == set(units)
    assert {name for c in mmasim.CONFIGS for name in mmasim.MODELS if mmasim.applies(name, c)} \
        == set(mmasim.MODELS)
    assert set().union(*map(_divergences, UNIT_GROUPS)) == {d.name for d in mmasim.MMA_DIVERGENCES}
    assert sum(map(_outputs, UNIT_GROUPS)) == ALL_OUTPUTS > 0


@pytest.mark.slow
@pytest.mark.parametrize("group", UNIT_GROUPS, ids=lambda g: g[0] + (f"+{len(g) - 1}" if len(g) > 1 else ""))
def test_every_unit_mmasim_has_conforms_with_only_named_divergences(group):
    rows = mmasim.mmasim_rows(list(group), big=False)
    bad = [(r.fmt, r.model, r.examples) for r in rows if r.failed]
    assert not bad, bad
    assert {r.fmt.split()[0] for r in rows} == set(group)
    cfgs = [c for c in mmasim.CONFIGS if c.unit in group]
    assert {r.model for r in rows} == {name for c in cfgs for name in mmasim.MODELS if mmasim.applies(name, c)}
    # every named divergence is real: it shows on the coverage models (on one of its units, which are
    # all in this group)
    seen = {name for r in rows for name in r.known}
    assert seen == _divergences(group)
    # and the arithmetic divergences cover little: below 1 % of the outputs of all units, a budget the
    # groups that can show one share (mmasim.nan_payload is only which NaN bits: every NaN of random
    # codes over the whole range, on CDNA1/2)
    assert sum(r.cases for r in rows) == _outputs(group)
    arith = sum(v for r in rows for k, v in r.known.items() if k != "mmasim.nan_payload")
    if group in _ARITH_GROUPS:
        assert arith < 0.01 * ALL_OUTPUTS / len(_ARITH_GROUPS)
    else:
        assert arith == 0


def test_conform_runs_mmasim_by_unit_name():
    rows = run(("mmasim",), formats=["sm100_mxf4nvf4"], big=False)
    assert rows and all(r.fmt.startswith("sm100_mxf4nvf4") for r in rows)
    assert sum(r.failed for r in rows) == 0 and sum(r.cases for r in rows) > 1000


@pytest.mark.parametrize("unit,change", [("sm90_wgmma_fp8", dict(fraction_bits=14)),
                                          pytest.param("sm100_mxf4", dict(e_zero=-100), marks=pytest.mark.slow),
                                          pytest.param("cdna3_mfma_fp8", dict(even_odd=False), marks=pytest.mark.slow),
                                          pytest.param("sm89_mma_fp8", dict(k=32), marks=pytest.mark.slow)])
def test_a_wrong_unit_record_is_caught(monkeypatch, unit, change):
    """The comparison can fail: one parameter off and MMA-Sim disagrees."""
    monkeypatch.setitem(units._BY_NAME, unit, replace(UNITS[unit], **change))  # UNITS itself is read-only
    rows = mmasim.mmasim_rows([unit], big=False)
    assert sum(r.failed for r in rows) > 0


def test_mmasim_fp4_packing_is_high_nibble_first(rng):
    """mxf4 operands reach MMA-Sim with the first element in the high nibble; packing A low
    nibble first (the memory order of OCP / PyTorch) while B stays high first pairs the
    wrong elements and gives different results."""
    import torch

    cfg = mmasim.Config("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32)
    a = rng.integers(0, 16, (4, 64))
    b = rng.integers(0, 16, (64, 8))
    c = np.zeros((4, 8), np.float32)
    sa, sb = np.full((4, 2), 127), np.full((2, 8), 127)
    same, ours, _ = mmasim.compare(cfg, (a, b, c, sa, sb))
    assert same.all()
    op = mmasim._instruction(cfg)

    def low_first(x):
        x = x.astype(np.uint8)
        return torch.from_numpy(np.ascontiguousarray(x[..., 0::2] | (x[..., 1::2] << 4)))
    wrong = op(low_first(a), mmasim._pack_high_first(b.T).T, torch.from_numpy(c.copy()),
               mmasim._torch_scales(sa, "e8m0"), mmasim._torch_scales(sb, "e8m0")).numpy()
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


def test_fp16_output_and_tf32_units_conform():
    """The fast tier's sample of the instructions beyond the first ten: an fp16-accumulate
    mma, a tf32 mma (fp32 patterns with random low bits reach both sides), CDNA2's
    flush-to-zero MFMA and RTX Blackwell's m16n8k64 mxf4nvf4."""
    cfgs = [mmasim.Config("sm80_mma_fp16_f16", "fp16", "fp16", op=("MMA", "Ampere", "m16n8k16.f16.f16.f16.f16")),
            mmasim.Config("sm90_mma_tf32_k4", "tf32", "tf32", op=("MMA", "Hopper", "m16n8k4.f32.tf32.tf32.f32")),
            mmasim.Config("cdna2_mfma_bf16", "bf16", "bf16", op=("MFMA", "CDNA2", "f32_4x4x2bf16")),
            mmasim.Config("sm120_mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16,
                             op=("MMABlockScale", "RTX Blackwell",
                                 "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"))]
    rng = np.random.default_rng(3)
    for cfg in cfgs:
        op = mmasim._instruction(cfg)
        for name in ("random", "cancellation", "special_c"):
            case = mmasim._model(name, cfg, rng, 16, 8, UNITS[cfg.unit].k * 3)
            same, ours, theirs = mmasim.compare(cfg, case, op)
            known = mmasim.explain_mma(cfg.unit, ours, theirs, {"case": case, "cfg": cfg})
            covered = same.copy()
            for mask in known.values():
                covered |= mask
            assert covered.all(), (cfg.label, name, ours[~covered][:4], theirs[~covered][:4])


def test_unit_records_carry_mmasim_parameters():
    """Every instruction's fmtsim unit has the parameters MMA-Sim's own instruction object
    holds (F, rho, e_zero; L = min(the instruction's K, L_max); G; CDNA's P and L_max)."""
    rho = {"RZ-FP32": "rz_fp32", "RZ-E8M13": "rz_e8m13", "RNE-FP16": "rne_fp16", "RNE-FP32": "rne_fp32"}
    for cfg in mmasim.CONFIGS:
        u = UNITS[cfg.unit]
        op = mmasim._instruction(cfg)
        ar = op.arithmetic_op
        kind = type(ar).__name__
        st = cfg.instruction()[2]
        assert u.tf32_inputs == ("tf32" in st or "xf32" in st), cfg.label
        if kind in ("MMA_T_FDPA", "MMA_ST_FDPA", "MMA_GST_FDPA"):
            assert u.family == ("nv_grouped" if kind == "MMA_GST_FDPA" else "nv"), cfg.label
            assert (u.fraction_bits, u.e_zero, u.output) == (ar.F, ar.e_zero, rho[ar.rho]), cfg.label
            assert u.k == min(op.k, ar.L_max), cfg.label
            if kind == "MMA_GST_FDPA":
                assert u.group == ar.G
            assert u.c_format == ("fp16" if op.c_type.itemsize == 2 else "fp32"), cfg.label
        elif kind in ("MMA_TR_FDPA", "MMA_GTR_FDPA"):
            assert u.family == "amd" and u.even_odd == (kind == "MMA_GTR_FDPA"), cfg.label
            assert (u.fraction_bits, u.fraction_bits2, u.output) == (ar.F, ar.F2, rho[ar.rho]), cfg.label
            assert u.k == min(op.k, ar.L_max), cfg.label
        elif kind == "MMA_E_FDPA":
            assert u.family == "exact" and u.k == min(op.k, ar.L_max), cfg.label
        elif kind == "MMA_FTZ_MUL_ADD":
            assert u.family == "ftz" and u.k == ar.P, cfg.label
        elif kind == "MMA_FMA":  # one exactly rounded FMA per product, in the operands' own format
            import torch

            fmt = {torch.float32: "fp32", torch.float64: "fp64"}[op.a_type]
            assert u.family == "fma" and u.k == 1 and u.formats == (fmt,), cfg.label
            assert u.c_format == fmt and op.c_type == op.d_type == op.a_type, cfg.label
        else:
            raise AssertionError(f"{cfg.label}: MMA-Sim arithmetic {kind} has no fmtsim family")


def test_configs_cover_every_instruction_mmasim_lists():
    """Every (architecture, shape and type) MMA-Sim 2.1.1 lists has a config, the FMA chains
    (fp64 mma, fp32/fp64 MFMA) included; wgmma and tcgen05.mma stand for every N by N = 8."""
    import re

    from mmasim.amd import isa_mfma
    from mmasim.nv_ptx import isa_mma, isa_tcgen05mma, isa_wgmma

    def n8(st):
        return re.sub(r"^m(\d+)n\d+k", r"m\1n8k", st)

    have = {(c.op[0], c.op[1], c.op[2]) for c in mmasim.CONFIGS}
    theirs = []
    for cls, table in (("MMA", isa_mma.mma_shape_and_type), ("MMABlockScale", isa_mma.mma_block_scale_shape_and_type),
                       ("WGMMA", isa_wgmma.wgmma_shape_and_type),
                       ("TCGen05MMA", isa_tcgen05mma.tcgen05mma_shape_and_type),
                       ("TCGen05MMABlockScale", isa_tcgen05mma.tcgen05mma_block_scale_shape_and_type),
                       ("MFMA", isa_mfma.arch_mfma_suffix)):
        for arch, sts in table.items():
            for st in sts:
                if cls in ("WGMMA", "TCGen05MMA", "TCGen05MMABlockScale"):
                    if cls != "TCGen05MMABlockScale" and not st.startswith("m64"):
                        continue
                    st = n8(st)
                theirs.append((cls, arch, st))
    fma = {t for t in theirs if ".f64." in t[2] or re.match(r"f(32|64)_.*[^x]f(32|64)$", t[2])}
    assert set(theirs) == have and mmasim.NOT_MODELLED == ()
    assert len(fma) == 27  # 6 NVIDIA fp64 shapes on 5 architectures, 17 AMD fp32 / fp64 suffixes
    assert {c.unit for c in mmasim.CONFIGS if c.op in fma} == {"sm80_mma_fp64", "cdna1_mfma_fp32",
                                                                  "cdna2_mfma_fp64"}
