"""The built-in implementation ``mmasim``: MMA-Sim's instruction models against
fmtsim.mma, unit by unit, bit for bit.

MMA-Sim (PyPI ``mmasim`` 2.1.1, MIT; Xie et al., arXiv:2511.10909) simulates the
matrix instructions in PyTorch on the CPU. Each named fmtsim unit that it models is run
against its instruction class (nv_ptx ``MMA``, ``WGMMA``, ``TCGen05MMA``,
``TCGen05MMABlockScale``; amd ``MFMA``) on every operand-format pair the instruction
takes, over coverage models:

    random            uniform codes over each format's whole range (NaN and Inf codes
                      included), random fp32 C, random scale codes
    cancellation      pairs of products that cancel exactly, plus small ones
    huge_tiny         one largest-magnitude product among the smallest subnormal ones
    below_e_zero      block scales 2^-127 so that every product is below e_zero
    subnormal         subnormal operands only
    c_dominates       C near 2^100 with ordinary products
    c_negligible      fp32-subnormal C under large products
    zero_blocks       whole blocks (instructions, scale blocks, groups) of zero codes
    scale_extremes    E8M0 0x00 / 0xFE (and 0xFF NaN), UE4M3 codes with bit 7 set
    special_c         NaN and +-Inf C under products up to the largest

Operand layouts MMA-Sim expects (confirmed in mmasim/arithmetic/helper.py): FP6 codes
one per byte in bits 5:0 and FP4 codes in bits 5:2 for ``kind::f8f6f4`` /
``mxf8f6f4``; for ``mxf4`` / ``mxf4nvf4`` two FP4 codes per byte with the FIRST element
in the HIGH nibble (``unpack_uint8_to_fp4`` stacks high before low), the opposite of
the memory order of OCP/PyTorch packing. mxf8f6f4's model takes one scale per
instruction (``st_fdpa`` broadcasts a single scale over the K=32 products), so longer
K is chained here instruction by instruction, as a kernel does.

Known differences are named in :data:`MMA_DIVERGENCES`, each with its reason; any other
difference is a failure.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..mma import UNITS, matmul
from ..mma.arith import FINITE, operand_table
from ..mma.units import F8F6F4, Unit

__all__ = ["missing", "CONFIGS", "Config", "mmasim_rows", "MMA_DIVERGENCES", "run_mmasim", "MODELS"]

PTX = {"e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": "e2m1", "fp16": "f16", "bf16": "bf16"}
AMD = {"e4m3fnuz": "fp8", "e5m2fnuz": "bf8", "fp16": "f16", "bf16": "bf16"}

MODELS = ("random", "cancellation", "huge_tiny", "below_e_zero", "subnormal", "c_dominates", "c_negligible",
          "zero_blocks", "scale_extremes", "special_c")


def missing() -> str | None:
    """Why the mmasim implementation cannot run here (None when it can)."""
    for mod in ("torch", "mmasim"):
        if importlib.util.find_spec(mod) is None:
            return f"mmasim: the {mod} package is not installed (pip install \"fmtsim[mma]\")"
    return None


@dataclass(frozen=True)
class Config:
    unit: str
    a_format: str
    b_format: str
    scale_format: str | None = None
    block_size: int | None = None

    @property
    def label(self) -> str:
        s = f"{self.unit} {self.a_format}x{self.b_format}"
        if self.scale_format:
            s += f" {self.scale_format}x{self.block_size}"
        return s


def _configs() -> list[Config]:
    out = []
    for a in ("e4m3", "e5m2"):
        for b in ("e4m3", "e5m2"):
            out.append(Config("sm89_mma_fp8", a, b))
            out.append(Config("sm90_wgmma_fp8", a, b))
    for t in ("fp16", "bf16"):
        out.append(Config("sm90_wgmma_fp16", t, t))
        out.append(Config("cdna3_mfma_fp16", t, t))
    for a in F8F6F4:
        for b in F8F6F4:
            out.append(Config("sm100_f8f6f4", a, b))
            out.append(Config("sm100_mxf8f6f4", a, b, "e8m0", 32))
    out.append(Config("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32))
    for sf, bs in (("e8m0", 32), ("e8m0", 16), ("ue4m3", 16)):
        out.append(Config("sm100_mxf4nvf4", "e2m1", "e2m1", sf, bs))
    for a in ("e4m3fnuz", "e5m2fnuz"):
        for b in ("e4m3fnuz", "e5m2fnuz"):
            out.append(Config("cdna3_mfma_fp8", a, b))
    return out


CONFIGS = _configs()


# ---- calling MMA-Sim ------------------------------------------------------------------

def _torch_codes(codes: np.ndarray, fmt: str) -> Any:
    import torch

    if fmt in ("fp16", "bf16"):
        t = torch.from_numpy(np.ascontiguousarray(codes.astype(np.uint16)).view(np.int16).copy())
        return t.view(torch.float16 if fmt == "fp16" else torch.bfloat16)
    c = codes.astype(np.uint8)
    if fmt == "e2m1":
        c = (c << 2).astype(np.uint8)  # f8f6f4: an FP4 code sits in bits 5:2
    t = torch.from_numpy(np.ascontiguousarray(c).copy())
    dt = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e4m3fnuz": torch.float8_e4m3fnuz,
          "e5m2fnuz": torch.float8_e5m2fnuz}.get(fmt)
    return t.view(dt) if dt is not None else t


def _torch_scales(codes: np.ndarray, fmt: str) -> Any:
    import torch

    t = torch.from_numpy(np.ascontiguousarray(codes.astype(np.uint8)).copy())
    return t.view(torch.float8_e8m0fnu if fmt == "e8m0" else torch.float8_e4m3fn)


def _pack_high_first(codes: np.ndarray) -> Any:
    import torch

    c = codes.astype(np.uint8)
    return torch.from_numpy(np.ascontiguousarray((c[..., 0::2] << 4) | c[..., 1::2]))


def _instruction(cfg: Config) -> Any:
    from mmasim.amd import MFMA
    from mmasim.nv_ptx import MMA, WGMMA, TCGen05MMA, TCGen05MMABlockScale

    a, b = cfg.a_format, cfg.b_format
    if cfg.unit == "sm89_mma_fp8":
        return MMA("Ada Lovelace", f"m16n8k32.f32.{PTX[a]}.{PTX[b]}.f32")
    if cfg.unit == "sm90_wgmma_fp8":
        return WGMMA("Hopper", f"m64n8k32.f32.{PTX[a]}.{PTX[b]}")
    if cfg.unit == "sm90_wgmma_fp16":
        return WGMMA("Hopper", f"m64n8k16.f32.{PTX[a]}.{PTX[b]}")
    if cfg.unit == "sm100_f8f6f4":
        return TCGen05MMA("Blackwell", f"m64n8k32.kind::f8f6f4.f32.{PTX[a]}.{PTX[b]}")
    if cfg.unit == "sm100_mxf8f6f4":
        return TCGen05MMABlockScale("Blackwell", f"m128n8k32.kind::mxf8f6f4.block32.f32.{PTX[a]}.{PTX[b]}.ue8m0")
    if cfg.unit == "sm100_mxf4":
        return TCGen05MMABlockScale("Blackwell", "m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0")
    if cfg.unit == "sm100_mxf4nvf4":
        s = "ue8m0" if cfg.scale_format == "e8m0" else "ue4m3"
        return TCGen05MMABlockScale("Blackwell", f"m128n8k64.kind::mxf4nvf4.block{cfg.block_size}.f32.e2m1.e2m1.{s}")
    if cfg.unit == "cdna3_mfma_fp8":
        return MFMA("CDNA3", f"f32_16x16x32_{AMD[a]}_{AMD[b]}")
    if cfg.unit == "cdna3_mfma_fp16":
        return MFMA("CDNA3", f"f32_16x16x16_{AMD[a]}")
    raise ValueError(f"mmasim has no instruction for unit {cfg.unit}")


def run_mmasim(cfg: Config, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
               sb: np.ndarray | None = None, op: Any = None) -> np.ndarray:
    """D = A @ B + C through MMA-Sim's instruction for ``cfg`` (codes in, float32 out)."""
    import torch

    op = op if op is not None else _instruction(cfg)
    C = torch.from_numpy(np.ascontiguousarray(c, dtype=np.float32).copy())
    with torch.no_grad():
        if cfg.scale_format is None:
            out = op(_torch_codes(a, cfg.a_format), _torch_codes(b, cfg.b_format), C)
        elif cfg.unit == "sm100_mxf8f6f4":
            assert sa is not None and sb is not None
            for j in range(a.shape[1] // 32):
                ks = slice(32 * j, 32 * j + 32)
                C = op(_torch_codes(a[:, ks], cfg.a_format), _torch_codes(b[ks], cfg.b_format), C,
                       _torch_scales(sa[:, j:j + 1], "e8m0"), _torch_scales(sb[j:j + 1], "e8m0"))
            out = C
        else:
            assert sa is not None and sb is not None and cfg.scale_format is not None
            # B's packed bytes run along K: MMA-Sim unpacks the last axis of B.T
            out = op(_pack_high_first(a), _pack_high_first(b.T).T, C, _torch_scales(sa, cfg.scale_format),
                     _torch_scales(sb, cfg.scale_format))
    return out.numpy().astype(np.float32)


# ---- coverage models ------------------------------------------------------------------

def _codes_where(fmt: str, pred: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    t = operand_table(fmt)
    finite = t.cls == FINITE
    with np.errstate(invalid="ignore"):
        v = np.abs(np.where(finite, t.values, 0.0))
    return np.nonzero(finite & pred(v, t.sig))[0]


def _finite_codes(fmt: str) -> np.ndarray:
    return _codes_where(fmt, lambda v, s: np.ones(v.shape, bool))


def _scale_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], spread: int = 12) -> np.ndarray:
    if fmt == "e8m0":
        return rng.integers(127 - spread, 127 + spread + 1, shape)
    # UE4M3 around 1.0 (0x38), normal codes
    return rng.integers(0x38 - 8 * (spread // 4), 0x38 + 8 * (spread // 4) + 1, shape).clip(1, 0x7E)


def _model(name: str, cfg: Config, rng: np.random.Generator, m: int, n: int, k: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    ta, tb = operand_table(cfg.a_format), operand_table(cfg.b_format)
    fa, fb = _finite_codes(cfg.a_format), _finite_codes(cfg.b_format)
    a = rng.choice(fa, (m, k))
    b = rng.choice(fb, (k, n))
    c = (rng.standard_normal((m, n)) * 2.0 ** rng.integers(-8, 12, (m, n))).astype(np.float32)
    sa = sb = None
    bs = cfg.block_size
    if cfg.scale_format is not None and bs:
        sa = _scale_codes(rng, cfg.scale_format, (m, k // bs))
        sb = _scale_codes(rng, cfg.scale_format, (k // bs, n))
    if name == "random":
        a = rng.integers(0, ta.n_codes, (m, k))
        b = rng.integers(0, tb.n_codes, (k, n))
        c = rng.integers(0, 1 << 32, (m, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
        c = np.where(rng.random((m, n)) < 0.25, np.float32(0), c).astype(np.float32)
        if sa is not None and sb is not None and cfg.scale_format:
            hi = 256 if cfg.scale_format == "e8m0" else 128
            sa = np.where(rng.random(sa.shape) < 0.5, rng.integers(0, hi, sa.shape), sa)
            sb = np.where(rng.random(sb.shape) < 0.5, rng.integers(0, hi, sb.shape), sb)
    elif name == "cancellation":
        half = k // 2
        perm = rng.permutation(k)
        p, q = perm[:half], perm[half:2 * half]
        nonzero = _codes_where(cfg.a_format, lambda v, s: v > 0)
        a[:, p] = rng.choice(nonzero, (m, half))  # FNUZ has no -0: flipping 0's sign would make NaN
        a[:, q] = a[:, p] ^ _sign_bit(cfg.a_format)
        b[q, :] = b[p, :]
        tiny = _codes_where(cfg.a_format, lambda v, s: (v > 0) & (v <= np.min(v[v > 0]) * 4))
        a[:, q[:2]] = rng.choice(tiny, (m, min(2, q.size)))
        c = np.where(rng.random((m, n)) < 0.5, np.float32(0), c).astype(np.float32)
    elif name == "huge_tiny":
        big_a = _codes_where(cfg.a_format, lambda v, s: v == v.max())
        big_b = _codes_where(cfg.b_format, lambda v, s: v == v.max())
        small_a = _codes_where(cfg.a_format, lambda v, s: (v > 0) & (v <= np.min(v[v > 0]) * 2))
        small_b = _codes_where(cfg.b_format, lambda v, s: (v > 0) & (v <= np.min(v[v > 0]) * 2))
        a = rng.choice(small_a, (m, k))
        b = rng.choice(small_b, (k, n))
        pos = rng.integers(0, k, m)
        a[np.arange(m), pos] = rng.choice(big_a, m)
        b[pos[: min(m, k)] % k, :] = rng.choice(big_b, (min(m, k), n))
        c = np.where(rng.random((m, n)) < 0.5, np.float32(0), c * np.float32(2.0 ** -40)).astype(np.float32)
    elif name == "below_e_zero":
        if sa is not None and sb is not None:
            if cfg.scale_format == "e8m0":  # scale products 2^-254 .. 2^-134: around and below e_zero
                sa = rng.integers(0, 64, sa.shape)
                sb = rng.integers(0, 64, sb.shape)
            else:  # UE4M3 subnormal scales
                sa = rng.integers(1, 8, sa.shape)
                sb = rng.integers(1, 8, sb.shape)
            sa[::3] = 127 if cfg.scale_format == "e8m0" else 0x38
        c = np.where(rng.random((m, n)) < 0.7, np.float32(0),
                     rng.choice(np.array([2.0 ** -126, -(2.0 ** -130), 2.0 ** -149], np.float32), (m, n))
                     ).astype(np.float32)
    elif name == "subnormal":
        sub_a = _codes_where(cfg.a_format, lambda v, s: (v > 0) & (s < (1 << ta.man_bits)))
        sub_b = _codes_where(cfg.b_format, lambda v, s: (v > 0) & (s < (1 << tb.man_bits)))
        if sub_a.size:
            a = rng.choice(sub_a, (m, k))
        if sub_b.size:
            b = rng.choice(sub_b, (k, n))
        c = np.where(rng.random((m, n)) < 0.5, np.float32(0), c * np.float32(2.0 ** -60)).astype(np.float32)
    elif name == "c_dominates":
        c = (rng.choice([-1.0, 1.0], (m, n)) * 2.0 ** rng.integers(40, 120, (m, n))
             * (1 + rng.random((m, n)))).astype(np.float32)
    elif name == "c_negligible":
        big_a = _codes_where(cfg.a_format, lambda v, s: v >= v.max() / 4)
        a = rng.choice(big_a, (m, k))
        c = (rng.choice([-1.0, 1.0], (m, n)) * rng.integers(1, 1 << 20, (m, n)) * 2.0 ** -149).astype(np.float32)
    elif name == "zero_blocks":
        w = UNITS[cfg.unit].group or UNITS[cfg.unit].k or 8
        for j in range(0, k, w):
            sel = rng.random(m) < 0.5
            a[sel, j:j + w] = 0
            selb = rng.random(n) < 0.3
            b[j:j + w][:, selb] = 0
        c = np.where(rng.random((m, n)) < 0.5, np.float32(0), c).astype(np.float32)
    elif name == "scale_extremes":
        if sa is not None and sb is not None and cfg.scale_format:
            if cfg.scale_format == "e8m0":
                pool = np.array([0x00, 0x01, 0x7F, 0xFD, 0xFE, 0xFF])
                sa = rng.choice(pool, sa.shape, p=[0.25, 0.1, 0.2, 0.1, 0.3, 0.05])
                sb = rng.choice(pool, sb.shape, p=[0.25, 0.1, 0.2, 0.1, 0.3, 0.05])
            else:
                sa = sa | np.where(rng.random(sa.shape) < 0.5, 0x80, 0)
                sb = sb | np.where(rng.random(sb.shape) < 0.5, 0x80, 0)
                sa = np.where(rng.random(sa.shape) < 0.05, rng.choice([0x00, 0x7E, 0xFE, 0x7F, 0xFF], sa.shape), sa)
                sb = np.where(rng.random(sb.shape) < 0.05, rng.choice([0x00, 0x7E, 0xFE, 0x7F, 0xFF], sb.shape), sb)
    elif name == "special_c":
        big_a = _codes_where(cfg.a_format, lambda v, s: v >= v.max() / 8)
        a[:, ::2] = rng.choice(big_a, (m, (k + 1) // 2))
        c = rng.choice(np.array([np.nan, np.inf, -np.inf, 1.0], np.float32), (m, n))
    else:
        raise ValueError(f"unknown mmasim coverage model {name!r}; choose from {', '.join(MODELS)}")
    return a, b, c, sa, sb


def _sign_bit(fmt: str) -> int:
    return {"fp16": 0x8000, "bf16": 0x8000, "e3m2": 0x20, "e2m3": 0x20, "e2m1": 0x8}.get(fmt, 0x80)


def applies(name: str, cfg: Config) -> bool:
    if name in ("below_e_zero", "scale_extremes"):
        return cfg.scale_format is not None
    return True


# ---- named divergences ----------------------------------------------------------------

@dataclass(frozen=True)
class MMADivergence:
    name: str
    units: tuple[str, ...]
    description: str
    # (ours, theirs, context) -> mask of outputs it covers
    expected: Callable[[np.ndarray, np.ndarray, dict[str, Any]], np.ndarray]


def _amd_negative_zero(ours: np.ndarray, theirs: np.ndarray, ctx: dict[str, Any]) -> np.ndarray:
    return (ours.view(np.uint32) == 0) & (theirs.view(np.uint32) == 0x80000000)


def _amd_special_c_dropped(ours: np.ndarray, theirs: np.ndarray, ctx: dict[str, Any]) -> np.ndarray:
    a, b = ctx["case"][0], ctx["case"][1]
    cfg: Config = ctx["cfg"]
    ta, tb = operand_table(cfg.a_format), operand_table(cfg.b_format)
    ea = np.where((ta.cls[a] == FINITE) & (ta.sig[a] != 0), ta.exp[a], -9999).astype(np.int64)
    eb = np.where((tb.cls[b] == FINITE) & (tb.sig[b] != 0), tb.exp[b], -9999).astype(np.int64)
    big = (ea[:, :, None] + eb[None, :, :]).max(axis=1) >= 25
    return ~np.isfinite(ours) & np.isfinite(theirs) & big


MMA_DIVERGENCES: list[MMADivergence] = [
    MMADivergence(
        "mmasim.amd_fp8_special_c_dropped",
        ("cdna3_mfma_fp8",),
        "MMA-Sim 2.1.1's CDNA3 FP8 model (gtr_fdpa) drops C when its exponent is below "
        "e_max - 25, and takes a NaN or Inf C's exponent from torch.frexp (0, so -1): when "
        "a step's products reach 2^25 (E5M2FNUZ products go up to 2^31) a NaN or Inf "
        "accumulator, e.g. from the previous step, silently vanishes. fmtsim keeps IEEE "
        "rules (a NaN C gives NaN, an Inf C Inf), as a NaN in a real accumulator does.",
        _amd_special_c_dropped,
    ),
    MMADivergence(
        "mmasim.amd_signed_zero",
        ("cdna3_mfma_fp8", "cdna3_mfma_fp16"),
        "A zero result of the AMD models: MMA-Sim 2.1.1 computes them in float64 tensors and "
        "keeps IEEE signed-zero arithmetic (torch.trunc of a negative product below the kept "
        "bits is -0.0, a sum of -0.0 terms stays -0.0, a zero C keeps its sign), so it can "
        "return -0.0; its NVIDIA models turn every zero into +0.0 explicitly. No published "
        "measurement gives MI300's zero sign; fmtsim writes +0 for every zero result.",
        _amd_negative_zero,
    ),
]


def explain_mma(unit: str, ours: np.ndarray, theirs: np.ndarray, ctx: dict[str, Any]) -> dict[str, np.ndarray]:
    return {d.name: d.expected(ours, theirs, ctx) for d in MMA_DIVERGENCES if unit in d.units}


# ---- rows -----------------------------------------------------------------------------

def _shape(u: Unit, big: bool) -> tuple[int, int, int]:
    steps = 3 if big else 2
    return (16, 8, u.k * steps)


def iter_cases(configs: list[Config], models: tuple[str, ...], trials: int, seed: int
               ) -> Iterator[tuple[Config, str, tuple[Any, ...]]]:
    for cfg in configs:
        u = UNITS[cfg.unit]
        for mi, name in enumerate(models):
            if not applies(name, cfg):
                continue
            rng = np.random.default_rng([seed, CONFIGS.index(cfg), mi])
            for _ in range(trials):
                m, n, k = _shape(u, True)
                yield cfg, name, _model(name, cfg, rng, m, n, k)


def compare(cfg: Config, case: tuple[Any, ...], op: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b, c, sa, sb = case
    ours = matmul(a, b, c, unit=cfg.unit, a_format=cfg.a_format, b_format=cfg.b_format, a_scales=sa, b_scales=sb,
                  scale_format=cfg.scale_format, block_size=cfg.block_size)
    theirs = run_mmasim(cfg, a, b, c, sa, sb, op)
    ob, tb = ours.view(np.uint32), theirs.view(np.uint32)
    same = (ob == tb) | (np.isnan(ours) & np.isnan(theirs) & (tb == 0x7FFFFFFF))
    return same, ours, theirs


def mmasim_rows(units: list[str] | None = None, big: bool = True, seed: int = 10) -> list[Any]:
    """One Row per (unit, formats, model): fmtsim.mma against MMA-Sim, output bits."""
    from .rows import Row

    why = missing()
    if why is not None:
        raise ValueError(why)
    trials = 4 if big else 1
    cfgs = [c for c in CONFIGS if units is None or c.unit in units]
    rows: dict[tuple[str, str], Any] = {}
    ops: dict[Config, Any] = {}
    cases: Any = iter_cases(cfgs, MODELS, trials, seed)
    if sys.stderr.isatty():
        try:
            from tqdm import tqdm

            total = sum(trials for c in cfgs for mname in MODELS if applies(mname, c))
            cases = tqdm(cases, total=total, desc="mmasim", unit="case")
        except ImportError:
            pass
    for cfg, name, case in cases:
        op = ops.get(cfg)
        if op is None:
            op = ops[cfg] = _instruction(cfg)
        row = rows.setdefault((cfg.label, name), Row("mmasim", cfg.label, name))
        same, ours, theirs = compare(cfg, case, op)
        ctx = {"case": case, "cfg": cfg}
        known = explain_mma(cfg.unit, ours, theirs, ctx)
        flat_o, flat_t = ours.reshape(-1), theirs.reshape(-1)
        m, n = ours.shape

        def describe(i: int, fo: np.ndarray = flat_o, ft: np.ndarray = flat_t, nn: int = n) -> str:
            return (f"D[{i // nn}, {i % nn}]: fmtsim {int(fo[i:i + 1].view(np.uint32)[0]):#010x} ({fo[i]!r}), "
                    f"mmasim {int(ft[i:i + 1].view(np.uint32)[0]):#010x} ({ft[i]!r})")
        row.add(same.reshape(-1), {k: v.reshape(-1) for k, v in known.items()}, describe)
    return list(rows.values())

