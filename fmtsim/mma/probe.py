"""A probe that characterises a matrix unit from its outputs alone.

``gen(set)`` writes operands whose results reveal a unit's features (after Fasi,
Higham, Mikaitis and Pranesh, PeerJ CS 2021, and Khattak and Mikaitis,
arXiv:2512.07004): designed rows (C = +-2^t against one product +-x reveal how many
fraction bits survive alignment and which way they are cut; a large product placed at
each position among small ones reveals how many products fuse before normalisation;
sign-symmetric rows the output rounding; subnormal operands; zero terms against tiny
scaled products the e_zero floor; C far above and below the products where C joins)
plus random rows over the whole range of the format. The user's kernel computes
D = A @ B + C on them (P x K times K x NB, block scales along K) and returns D.

``infer(set, d)`` simulates every candidate unit of the family grid (exact; NVIDIA
fused steps with L in 8..64, F in 8..40, output RZ fp32 / RZ e8m13 / RNE fp32, e_zero;
NVIDIA grouped steps for FP4 with block scales; AMD grouped steps with F, even/odd
groups and where C joins) with fmtsim.mma and keeps those that reproduce every output
bit for bit; it reports their features and the named unit they match, or the nearest
candidate and named unit and the outputs where they differ.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from .arith import FINITE, operand_table
from .gemm import matmul
from .units import UNITS, Unit

__all__ = ["PROBE_SETS", "SM120_HYPOTHESES", "ProbeSet", "gen", "candidates", "infer", "Inference", "simulate",
           "unobservable"]


@dataclass(frozen=True)
class ProbeSet:
    name: str
    a_format: str
    b_format: str
    scale_format: str | None = None
    block_size: int | None = None
    k: int = 128
    title: str = ""
    question: bool = False  # adds the rows that settle the sm_120 question (F=25 or 35, grouped or not)
    c_format: str = "fp32"  # fp16: C (and the D read back) are fp16 values, for the .f16 instructions
    steps: tuple[int, ...] = (8, 16, 32, 64)  # the grid's products per step (L)


PROBE_SETS = {p.name: p for p in [
    ProbeSet("fp8", "e4m3", "e4m3", title="FP8 E4M3 (Ada / Hopper / Blackwell f8f6f4)"),
    ProbeSet("fp8fnuz", "e4m3fnuz", "e4m3fnuz", title="FP8 E4M3FNUZ (AMD CDNA3)"),
    ProbeSet("fp16", "fp16", "fp16", title="fp16 (Volta to Blackwell mma / wgmma, CDNA1-3 MFMA)",
             steps=(4, 8, 16, 32)),
    ProbeSet("bf16", "bf16", "bf16", title="bf16 (Ampere to Blackwell mma / wgmma, CDNA1-3 MFMA)",
             steps=(2, 4, 8, 16, 32)),
    ProbeSet("fp16_f16", "fp16", "fp16", c_format="fp16", steps=(4, 8, 16, 32),
             title="fp16 with fp16 C and D (the .f16 forms of mma / wgmma / tcgen05.mma)"),
    ProbeSet("fp8_f16", "e4m3", "e4m3", c_format="fp16", steps=(16, 32),
             title="FP8 E4M3 with fp16 C and D (Ada / Hopper / Blackwell .f16 forms)"),
    ProbeSet("tf32", "tf32", "tf32", steps=(4, 8, 16),
             title="tf32 (fp32 truncated to tf32: Ampere to Blackwell mma / wgmma, CDNA3 xf32)"),
    ProbeSet("fp4", "e2m1", "e2m1", title="FP4 E2M1 without scales (Blackwell f8f6f4)"),
    ProbeSet("mxfp8", "e4m3", "e4m3", "e8m0", 32, title="MXFP8: E4M3 with E8M0 per 32 (Blackwell mxf8f6f4)"),
    ProbeSet("mxfp4", "e2m1", "e2m1", "e8m0", 32, 256, title="MXFP4: E2M1 with E8M0 per 32 (mxf4 / mxf8f6f4)"),
    ProbeSet("nvfp4", "e2m1", "e2m1", "ue4m3", 16, 256, title="NVFP4: E2M1 with UE4M3 per 16 (mxf4nvf4)"),
    ProbeSet("sm120_mxf4nvf4", "e2m1", "e2m1", "e8m0", 32, 64, question=True,
             title="RTX Blackwell mma m16n8k64 kind::mxf4nvf4 (E8M0 x32, one instruction along K): "
                   "MMA-Sim's groups of 16 with F=35 against a hardware probe's 25 bits"),
]}

# The sm_120 question. MMA-Sim 2.1.1 (nv_ptx/sim.py MMABlockScale, k=64) models RTX
# Blackwell's block-scaled FP4 mma as its Blackwell tcgen05 model: groups of 16 products
# summed exactly, F=35. A public probe of an RTX 5090 (huweim/emulation_sys,
# bit_width_test_/README.md) reports 25 bits kept, RZ, for mma kind::mxf4nvf4 m16n8k64.
# The probe set "sm120_mxf4nvf4" has rows whose outputs differ between the two (and
# between grouped and ungrouped summation at either F); these are the hypotheses.
SM120_HYPOTHESES = {
    "mmasim": Unit("h_mmasim", "nv_grouped", 64, 35, -139, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"), (16, 32),
                   group=16, title="MMA-Sim: groups of 16 exact, F=35"),
    "probe25": Unit("h_probe25", "nv", 64, 25, -133, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"), (16, 32),
                    title="hardware probe: 25 bits, every product aligned (as kind::mxf8f6f4)"),
    "grouped25": Unit("h_grouped25", "nv_grouped", 64, 25, -139, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"),
                      (16, 32), group=16, title="groups of 16 exact, F=25"),
    "ungrouped35": Unit("h_ungrouped35", "nv", 64, 35, -133, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"), (16, 32),
                        title="every product aligned, F=35"),
}

NB = 4  # columns of B: ones, the largest magnitude, the smallest, random


def _get(name: str) -> ProbeSet:
    if name not in PROBE_SETS:
        raise ValueError(f"unknown probe set {name!r}; choose from {', '.join(PROBE_SETS)}")
    return PROBE_SETS[name]


def _code_of(fmt: str, value: float) -> int:
    t = operand_table(fmt)
    hit = np.nonzero((t.cls == FINITE) & (t.values == value))[0]
    if not hit.size:
        raise ValueError(f"{fmt} has no code for {value}")
    return int(hit[0])


def gen(name: str, seed: int = 7) -> dict[str, np.ndarray]:
    """The probe operands of a set: a (P, K), b (K, NB), c (P, NB) float32, and for scaled
    sets a_scales (P, K / block), b_scales (K / block, NB)."""
    ps = _get(name)
    ta, tb = operand_table(ps.a_format), operand_table(ps.b_format)
    k = ps.k
    rng = np.random.default_rng(seed)
    fin_a = np.nonzero(ta.cls == FINITE)[0]
    pos_a = fin_a[ta.values[fin_a] > 0]
    one_a, one_b = _code_of(ps.a_format, 1.0), _code_of(ps.b_format, 1.0)
    neg = ta.n_codes >> 1 if ps.a_format not in ("e4m3fnuz",) else 0x80
    tmax = 16 if ps.c_format == "fp16" else 50
    neg_one_a = one_a | neg
    big_a = int(pos_a[np.argmax(ta.values[pos_a])])
    tiny_a = int(pos_a[np.argmin(ta.values[pos_a])])
    fin_b = np.nonzero(tb.cls == FINITE)[0]
    pos_b = fin_b[tb.values[fin_b] > 0]
    big_b = int(pos_b[np.argmax(tb.values[pos_b])])
    tiny_b = int(pos_b[np.argmin(tb.values[pos_b])])
    b = np.empty((k, NB), np.int64)
    b[:, 0] = one_b
    b[:, 1] = big_b
    b[:, 2] = tiny_b
    b[:, 3] = rng.choice(pos_b, k) | np.where(rng.random(k) < 0.5, tb.n_codes >> 1, 0) * (ps.b_format != "e4m3fnuz")
    rows: list[np.ndarray] = []
    cs: list[np.ndarray] = []
    srows: list[Any] = []  # per row: None (random scales) or the scale codes of its blocks

    def row(a_row: np.ndarray, c_row: Any, scales: Any = "unit") -> None:
        rows.append(a_row)
        cs.append(np.broadcast_to(np.asarray(c_row, np.float32), (NB,)).copy())
        srows.append(scales)

    zero = np.zeros(k, np.int64)
    # fraction bits and the cut's direction: C = +-2^t, one product +-1 (column 0)
    for t in range(0, tmax, 1):
        for sc in (1.0, -1.0):
            for a0 in (one_a, neg_one_a):
                r = zero.copy()
                r[0] = a0
                row(r, sc * 2.0**t)
    if ps.c_format == "fp16":
        # fp16 D hides the cut behind its own rounding. In column 2 (B's smallest value): C = 2^e,
        # a product at fp16's half ulp 2^(e-11) and the smallest product p make an exact tie
        # unless the cut at 2^(e-F) keeps p, which breaks the tie upwards: F >= e - log2(p)
        tiny_b_value = float(tb.values[tiny_b])
        log2_p = int(np.log2(float(ta.values[tiny_a]) * tiny_b_value))
        for f in range(16, 30):
            e = f + log2_p
            half = 2.0 ** (e - 11) / tiny_b_value
            if not -14 <= e <= 14 or not np.any((ta.cls == FINITE) & (ta.values == half)):
                continue
            for sc in (1.0, -1.0):
                r = zero.copy()
                r[0] = _code_of(ps.a_format, sc * half)
                r[1] = tiny_a | (neg if sc < 0 else 0)
                row(r, sc * 2.0**e)
    # fusion width: one large product at position j among small ones (products 2^17.6 : 2^-18 in column 1/2)
    for j in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65):
        if j >= k:
            continue
        r = np.full(k, tiny_a)
        r[j] = big_a
        row(r, 0.0)
        r2 = np.full(k, tiny_a | neg if ps.a_format != "e4m3fnuz" else tiny_a)
        r2[j] = big_a
        row(r2, 0.0)
        r3 = zero.copy()
        r3[:j] = tiny_a
        r3[j] = big_a
        row(r3, 0.0)
    # C far above / below the products, subnormal operands, zero rows
    sub_a = fin_a[(ta.sig[fin_a] > 0) & (ta.sig[fin_a] < (1 << ta.man_bits))]
    for _ in range(8):
        row(rng.choice(sub_a if sub_a.size else pos_a, k), rng.choice([0.0, 2.0**-130, -(2.0**-140)]))
    row(zero, 1.0)
    row(zero, -(2.0**-149))
    sf, bs = ps.scale_format, ps.block_size
    b_scale_col3 = None
    if sf == "e8m0" and bs:
        # e_zero: every product below it (scale products 2^-150 and less) and a zero term, so the
        # alignment point is e_zero; a large positive product and a tiny negative one in column 3:
        # RZ shows whether the tiny one survived the cut at e_zero - F
        b_scale_col3 = np.full(k // bs, 52)
        b[0, 3] = big_b
        b[1, 3] = tiny_b
        b[bs, 3] = tiny_b
        pos_vals = pos_a[np.argsort(ta.values[pos_a])]
        for x in pos_vals[:: max(1, pos_vals.size // 24)]:
            r = zero.copy()
            r[0], r[1] = big_a, int(x) | neg
            row(r, 0.0, np.full(k // bs, 52))
        if k // bs >= 2:
            for y in range(0, 26):
                r = zero.copy()
                r[0], r[bs] = big_a, tiny_a | neg
                scodes = np.full(k // bs, 52)
                scodes[1] = 52 - y
                row(r, 0.0, scodes)
    if sf == "ue4m3" and bs:
        # groups: a large block and a tiny one whose two halves each fall below the cut but
        # whose sum does not (a group of 16 keeps it, groups of 8 lose it)
        b_scale_col3 = np.full(k // bs, 0x38)
        b_scale_col3[0], b_scale_col3[1] = 0x7E, 0x01
        b[0, 3], b[bs, 3], b[bs + 8, 3] = big_b, tiny_b, tiny_b
        for scale_small in (0x01, 0x02, 0x08):
            r = zero.copy()
            r[0], r[bs], r[bs + 8] = big_a, tiny_a | neg, tiny_a | neg
            scodes = np.full(k // bs, 0x38)
            scodes[0], scodes[1] = 0x7E, scale_small
            row(r, 0.0, scodes)
    if ps.question and sf == "e8m0" and bs and k >= 2 * bs:
        one1 = _code_of(ps.a_format, 1.0)
        four = _code_of(ps.a_format, 4.0)
        for d in range(16, 44):
            # F: C = 1 cancelled by -1 (block 0, scale 1), +2^-d (block 1, scale 2^-d): the
            # result is 2^-d when F >= d, else 0, grouped or not (the largest exponent is 0)
            r = zero.copy()
            r[0], r[bs] = neg_one_a, one1
            scodes = np.full(k // bs, 127)
            scodes[1] = 127 - d
            row(r, 1.0, scodes)
            # grouping: 4 - 4 in block 0 (scale 1) and +2^-d in block 1, C = 0. Grouped, the
            # group's exponent is its scale's (0) and 2^-d survives while d <= F; aligned one
            # by one, the products' exponent 2 sets the cut and it survives while d <= F - 2
            r = zero.copy()
            r[0], r[1], r[bs] = four, four | neg, one1
            row(r, 0.0, scodes.copy())
    # random rows over the whole finite range, with random C
    for _ in range(96):
        r = rng.choice(fin_a, k)
        r[rng.random(k) < 0.2] = 0
        cexp = rng.integers(-14, 15) if ps.c_format == "fp16" else rng.integers(-30, 40)
        row(r, rng.choice([0.0, 1.0, -1.0]) * 2.0 ** float(cexp) * (1 + rng.random()), None)
    a = np.stack(rows)
    c = np.stack(cs).astype(np.float32)
    if ps.c_format == "fp16":  # the instruction's C is fp16: C rounded there (at most 2^15, so finite)
        c = c.astype(np.float16).astype(np.float32)
    out: dict[str, np.ndarray] = {"a": a, "b": b, "c": c}
    if sf and bs:
        nbk = k // bs
        one = 127 if sf == "e8m0" else 0x38
        lo, hi = (100, 155) if sf == "e8m0" else (0x28, 0x50)
        sa = np.empty((a.shape[0], nbk), np.int64)
        for i, spec in enumerate(srows):
            if spec is None:
                sa[i] = rng.integers(lo, hi, nbk)
            elif isinstance(spec, str):
                sa[i] = one
            else:
                sa[i] = spec
        sb = np.full((nbk, NB), one, np.int64)
        sb[:, 3] = b_scale_col3 if b_scale_col3 is not None else rng.integers(lo, hi, nbk)
        if sf == "e8m0":
            sa[-20:-10] = rng.integers(0, 30, (10, nbk))  # random rows whose products fall below e_zero
        out["a_scales"], out["b_scales"] = sa.astype(np.uint8), sb.astype(np.uint8)
    return out


def unobservable(name: str) -> tuple[str, ...]:
    """Features a probe set cannot observe: e_zero needs every term below it, which only
    E8M0 scales reach (fp32 C stays at or above 2^-149)."""
    return () if _get(name).scale_format == "e8m0" else ("e_zero",)


def simulate(unit: Unit | str, name: str, probe: dict[str, np.ndarray]) -> np.ndarray:
    ps = _get(name)
    return matmul(probe["a"], probe["b"], probe["c"], unit=unit, a_format=ps.a_format, b_format=ps.b_format,
                  a_scales=probe.get("a_scales"), b_scales=probe.get("b_scales"), scale_format=ps.scale_format,
                  block_size=ps.block_size)


def _label(u: Unit) -> str:
    if u.family == "exact":
        return f"exact sum of {u.k} products and C, one RNE rounding per step" if u.k else "exact sum, one RNE rounding"
    if u.family == "ftz":
        return f"ftz: fp32 products added {'in pairs' if u.k == 2 else 'pairwise in fours'}, flush to zero"
    bits = [f"{u.family}", f"L={u.k}", f"F={u.fraction_bits}", u.output, f"e_zero={u.e_zero}"]
    if u.family == "nv_grouped":
        bits.insert(2, f"group={u.group}")
    if u.family == "amd":
        bits = [u.family, f"L={u.k}", f"F={u.fraction_bits}", f"F2={u.fraction_bits2}",
                "even/odd" if u.even_odd else "one group", "small C dropped" if u.drop_small_c else "C kept",
                u.output]
    return " ".join(bits)


def candidates(name: str) -> list[Unit]:
    """The family grid for a probe set (Units with formats '*')."""
    ps = _get(name)
    sf = (ps.scale_format,) if ps.scale_format else ()
    bs = (ps.block_size,) if ps.block_size else ()
    out = [replace(UNITS["exact"], name="cand_exact")]
    wide = ps.a_format in ("fp16", "bf16")
    if wide and ps.c_format == "fp32":  # CDNA1 (exact per step) and CDNA2 (flush-to-zero fp32 adds)
        for L in (2, 4, 8):
            out.append(Unit(f"cand_exact_{L}", "exact", L, formats=("*",)))
            if L < 8:
                out.append(Unit(f"cand_ftz_{L}", "ftz", L, formats=("*",)))
    zeros = (-126, -132, -133, -139) if ps.scale_format else (-133,)
    outs = ("rne_fp16", "rz_fp32") if ps.c_format == "fp16" else ("rz_fp32", "rz_e8m13", "rne_fp32")
    for L, f, o, ez in itertools.product(ps.steps, range(8, 41), outs, zeros):
        if ps.block_size and L % ps.block_size and ps.block_size % L:
            continue
        if ps.block_size and L > ps.block_size and o != "rz_fp32":
            continue
        out.append(Unit(f"cand_nv_{L}_{f}_{o}_{ez}", "nv", L, f, ez, o, ("*",), sf, bs,  # type: ignore[arg-type]
                        c_format=ps.c_format))
    if ps.scale_format and ps.a_format == "e2m1":
        for L, g, f, o, ez in itertools.product((32, 64), (8, 16), range(20, 41), ("rz_fp32", "rne_fp32"), zeros):
            if L % ps.block_size:  # type: ignore[operator]
                continue
            out.append(Unit(f"cand_g_{L}_{g}_{f}_{o}_{ez}", "nv_grouped", L, f, ez, o, ("*",), sf, bs,  # type: ignore[arg-type]
                            group=g))
    if not ps.scale_format and ps.c_format == "fp32":
        for L, f, eo, drop in itertools.product((4, 8, 16, 32), range(20, 29), (False, True), (False, True)):
            out.append(Unit(f"cand_amd_{L}_{f}_{eo}_{drop}", "amd", L, f, 0, "rne_fp32", ("*",), even_odd=eo,
                            fraction_bits2=31, drop_small_c=drop,
                            product_overflow_inf=ps.a_format in ("bf16", "tf32")))
    return out


@dataclass
class Inference:
    probe_set: str
    outputs: int
    consistent: list[Unit]
    named: list[str]  # named units that reproduce every output
    nearest: list[tuple[int, Unit]]  # (mismatching outputs, candidate), fewest first
    named_nearest: list[tuple[int, str, list[int]]]  # (mismatches, named unit, first differing outputs)
    # named units that give every output under another order (`fmtsim mma matmul` options): a
    # kernel on that unit that walks K backwards, adds C in its epilogue or splits K
    reordered: list[str] = field(default_factory=list)

    def features(self) -> dict[str, str]:
        """The features every consistent candidate shares (others: 'not determined')."""
        if not self.consistent:
            return {}
        fams = {u.family for u in self.consistent}
        keys: tuple[str, ...] = ("family", "k", "fraction_bits", "output", "e_zero")
        if fams <= {"exact", "ftz"}:
            keys = ("family", "k")
        elif "nv_grouped" in fams:
            keys += ("group",)
        elif "amd" in fams:
            keys = ("family", "k", "fraction_bits", "fraction_bits2", "even_odd", "drop_small_c", "output")
        out = {}
        hidden = unobservable(self.probe_set)
        for key in keys:
            if key in hidden:
                out[key] = "not observable with this probe set"
                continue
            vals = {getattr(u, key) for u in self.consistent}
            out[key] = str(vals.pop()) if len(vals) == 1 else "not determined (" + ", ".join(
                sorted(str(getattr(u, key)) for u in self.consistent)[:6]) + ")"
        return out

    def report(self) -> list[str]:
        lines = [f"probe set {self.probe_set}: {self.outputs} outputs"]
        if self.consistent:
            lines.append(f"{len(self.consistent)} candidate(s) reproduce every output bit for bit:")
            lines += [f"  {_label(u)}" for u in self.consistent[:8]]
            for k, v in self.features().items():
                lines.append(f"  {k}: {v}")
        else:
            d, u = self.nearest[0]
            lines.append(f"no candidate reproduces every output; nearest: {_label(u)} ({d} outputs differ)")
        if self.named:
            lines.append("matches named unit(s): " + ", ".join(self.named))
        else:
            lines.append("matches no named unit")
            for n, uname, where in self.named_nearest[:3]:
                lines.append(f"  {uname}: {n} outputs differ (first at flat index {', '.join(map(str, where))})")
            if self.reordered:
                lines.append("but every output is a named unit's under another order (fmtsim mma matmul):")
                lines += [f"  --unit {r}" for r in self.reordered]
            elif self.named_nearest:
                lines.append("nor under another order of the nearest named units (reversed K, an epilogue C, "
                             "a split K)")
        return lines


def _differ(x: np.ndarray, y: np.ndarray) -> int:
    same = (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))
    return int((~same).sum())


def _prepared(name: str, probe: dict[str, np.ndarray], rows: np.ndarray | None = None) -> Any:
    from .gemm import prepare

    ps = _get(name)
    sel = slice(None) if rows is None else rows
    a = probe["a"][sel]
    sa = probe["a_scales"][sel] if "a_scales" in probe else None
    any_unit = Unit("probe", "exact", 0, formats=("*",), scale_formats=(ps.scale_format,) if ps.scale_format else (),
                    block_sizes=(ps.block_size,) if ps.block_size else ())
    prep, _ = prepare(a, probe["b"], unit=any_unit, a_format=ps.a_format, b_format=ps.b_format, a_scales=sa,
                      b_scales=probe.get("b_scales"), scale_format=ps.scale_format, block_size=ps.block_size)
    return prep, probe["c"][sel]


def _run(prep: Any, c: np.ndarray, u: Unit) -> np.ndarray:
    prep.unit = u
    out = np.asarray(prep.chain(c, 0, prep.k_padded), np.float32)
    bits = out.view(np.uint32).copy()
    bits[np.isnan(out)] = 0x7FFFFFFF
    return bits.view(np.float32)


# Candidate outputs depend only on the probe operands, not on the device's outputs: kept per
# (operands, rows, unit) so that inferring several devices' outputs on one probe set (a kit run
# on many GPUs, the test of every named unit) simulates the grid once.
_RUN_CACHE: dict[tuple[Any, ...], np.ndarray] = {}
_RUN_CACHE_LIMIT = 40_000


def _probe_digest(name: str, probe: dict[str, np.ndarray]) -> tuple[Any, ...]:
    import hashlib

    h = hashlib.sha256()
    for key in sorted(probe):
        arr = np.ascontiguousarray(probe[key])
        h.update(f"{key}:{arr.dtype.str}:{arr.shape}".encode())
        h.update(arr.tobytes())
    return (name, h.hexdigest())


def _run_cached(digest: tuple[Any, ...], sampled: bool, prep: Any, c: np.ndarray, u: Unit) -> np.ndarray:
    key = (digest, sampled, tuple(getattr(u, f.name) for f in fields(u) if f.name not in ("name", "title")))
    hit = _RUN_CACHE.get(key)
    if hit is None:
        if len(_RUN_CACHE) >= _RUN_CACHE_LIMIT:
            _RUN_CACHE.clear()
        hit = _RUN_CACHE[key] = _run(prep, c, u)
    return hit


def infer(name: str, d: np.ndarray, probe: dict[str, np.ndarray] | None = None) -> Inference:
    """The candidates (and named units) that reproduce the device's outputs ``d``.

    Candidates are first run on every fourth probe row; those that reproduce it (and the
    five nearest, for the report) are then run on every row."""
    probe = probe if probe is not None else gen(name)
    want = np.asarray(d, np.float32).reshape(probe["c"].shape)
    rows = np.arange(0, len(want), 4)
    prep_s, c_s = _prepared(name, probe, rows)
    prep, c = _prepared(name, probe)
    digest = _probe_digest(name, probe)
    first = sorted(((_differ(_run_cached(digest, True, prep_s, c_s, u), want[rows]), i, u)
                    for i, u in enumerate(candidates(name))), key=lambda t: (t[0], t[1]))
    keep = [u for n, _, u in first if n == 0] or [u for _, _, u in first[:5]]
    scored = sorted(((_differ(_run_cached(digest, False, prep, c, u), want), u) for u in keep),
                    key=lambda t: t[0])
    consistent = [u for n, u in scored if n == 0]
    ps = _get(name)
    named = []
    named_nearest = []
    for u in UNITS.values():
        if not (u.takes(ps.a_format) and u.takes(ps.b_format)):
            continue
        if bool(ps.scale_format) != (u.scaled and u.family != "exact"):
            continue
        if u.c_format != ps.c_format:
            continue
        if ps.scale_format and (ps.scale_format not in u.scale_formats or ps.block_size not in u.block_sizes):
            continue
        got = _run_cached(digest, False, prep, c, u)
        n = _differ(got, want)
        if n == 0:
            named.append(u.name)
        else:
            same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
            named_nearest.append((n, u.name, [int(i) for i in np.nonzero(~same.reshape(-1))[0][:5]]))
    named_nearest.sort()
    reordered = [] if named else _reordered(name, probe, want, [u for _, u, _ in named_nearest[:5]])
    return Inference(name, int(want.size), consistent, named, scored[:5], named_nearest, reordered)


def _reordered(name: str, probe: dict[str, np.ndarray], want: np.ndarray, units: list[str]) -> list[str]:
    """'UNIT OPTIONS' for each of ``units`` that gives ``want`` under one of ORDER_EXPLANATIONS."""
    from .gemm import ORDER_EXPLANATIONS, matmul

    ps = _get(name)
    found = []
    for uname in units:
        for option, how in ORDER_EXPLANATIONS:
            try:
                got = matmul(probe["a"], probe["b"], probe["c"], unit=uname, a_format=ps.a_format,
                             b_format=ps.b_format, a_scales=probe.get("a_scales"), b_scales=probe.get("b_scales"),
                             scale_format=ps.scale_format, block_size=ps.block_size, **how)
            except ValueError:  # an order this unit cannot take (an epilogue C for an fp16 D, K in one step)
                continue
            if _differ(got, want) == 0:
                found.append(f"{uname} {option}")
    return found


def write_probes(out: Any, names: list[str] | None = None, seed: int = 7) -> list[str]:
    """probe.<set>.bin (raw little-endian arrays) and probe.json (their layout and how to
    run them) in directory ``out``; returns the file names written."""
    import json
    from pathlib import Path

    from ..fileio import atomic_write, check_replaceable

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory; -o names the directory to write probes into")
    for name in [*(f"probe.{n}.bin" for n in names or list(PROBE_SETS)), "probe.json"]:
        check_replaceable(out / name, what="probe file")  # all refused before any is written
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"seed": seed, "sets": {}}
    written = []
    for name in names or list(PROBE_SETS):
        ps = _get(name)
        p = gen(name, seed)
        wide = ps.a_format in ("fp16", "bf16")
        if ps.a_format == "tf32":  # written as the fp32 patterns a kernel loads (tf32 values)
            arrays = [("a", (p["a"] << 13).astype(np.uint32)), ("b", (p["b"] << 13).astype(np.uint32)), ("c", p["c"])]
        else:
            arrays = [("a", p["a"].astype(np.uint16 if wide else np.uint8)),
                      ("b", p["b"].astype(np.uint16 if wide else np.uint8)), ("c", p["c"])]
        if "a_scales" in p:
            arrays += [("a_scales", p["a_scales"]), ("b_scales", p["b_scales"])]
        data = b""
        layout = []
        for n, arr in arrays:
            arr = np.ascontiguousarray(arr)
            layout.append({"name": n, "dtype": arr.dtype.str.lstrip("<|="), "shape": list(arr.shape),
                           "offset": len(data), "nbytes": arr.nbytes})
            data += arr.tobytes()
        fname = f"probe.{name}.bin"
        atomic_write(out / fname, data)
        written.append(fname)
        manifest["sets"][name] = {
            "file": fname, "title": ps.title, "a_format": ps.a_format, "b_format": ps.b_format,
            "scale_format": ps.scale_format, "block_size": ps.block_size, "P": int(p["a"].shape[0]), "K": ps.k,
            "NB": NB, "arrays": layout,
            "run": "D = A @ B + C (P x K times K x NB; scales per block along K: a_scales (P, K/block), "
                   "b_scales (K/block, NB)) on your kernel; write D as P*NB float32, row-major, little-endian, "
                   f"to a file named probe.{name}.d.bin; then: fmtsim probe infer probe.{name}.d.bin"}
    atomic_write(out / "probe.json", (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return [*written, "probe.json"]


def read_results(path: Any, name: str | None = None, probes: Any = None) -> tuple[str, np.ndarray,
                                                                                  dict[str, np.ndarray]]:
    """(set name, D, probe operands) from a result file probe.<set>.d.bin (raw float32)."""
    import json
    from pathlib import Path

    path = Path(path)
    if name is None:
        parts = path.name.split(".")
        if len(parts) < 3 or parts[0] != "probe" or parts[1] not in PROBE_SETS:
            raise ValueError(f"{path}: cannot tell the probe set from the name; pass --set "
                             f"({', '.join(PROBE_SETS)}) or name it probe.<set>.d.bin")
        name = parts[1]
    seed = 7
    if probes is not None:
        man = Path(probes) / "probe.json"
        seed = int(json.loads(man.read_text())["seed"])
    probe = gen(name, seed)
    data = path.read_bytes()
    want = probe["c"].size * 4
    if len(data) != want:
        raise ValueError(f"{path}: {len(data)} bytes; probe set {name} needs {probe['c'].shape[0]} x "
                         f"{probe['c'].shape[1]} float32 = {want} bytes")
    return name, np.frombuffer(data, "<f4").reshape(probe["c"].shape), probe
