"""``mmasim``: MMA-Sim's matrix-instruction models against fmtsim.mma, every named unit it has,
unit by unit, the output bits compared (``--formats`` may name units to run only those).

MMA-Sim (PyPI ``mmasim`` 2.1.1, MIT; Xie et al., arXiv:2511.10909) simulates the matrix
instructions in PyTorch on the CPU. Every instruction it lists (every architecture,
shape and type of nv_ptx ``MMA``, ``MMABlockScale``, ``WGMMA``, ``TCGen05MMA``,
``TCGen05MMABlockScale`` and amd ``MFMA`` CDNA1-3; wgmma and tcgen05 at N = 8, the
arithmetic being the same for every N) is a :class:`Config` naming the fmtsim unit that
models it (:data:`CONFIGS`), the FMA chains (fp64 mma, fp32 / fp64 MFMA: MMA-Sim's
``MMA_FMA``) included, so :data:`NOT_MODELLED` is empty. K is fed to MMA-Sim one unit
step at a time (an fma unit: one instruction of its own K), each step's D the next
step's C, as a kernel chains instructions. tf32 units get fp32 bit patterns with random
low bits on both sides (the truncation is tested); fp16-C units an fp16 C; the fma units
fp32 / fp64 bit patterns and an fp32 / fp64 C (their models draw from the whole fp32 /
fp64 range, :func:`_fma_model`). Each runs over coverage models:

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

import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...mma import UNITS, matmul
from ...mma.arith import FINITE, IEEE_FORMATS, operand_table
from ...mma.units import Unit
from ..plugin import Implementation, Request, import_problem
from ..rows import Row

PTX = {"e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": "e2m1", "fp16": "f16", "bf16": "bf16",
       "tf32": "tf32"}
AMD = {"e4m3fnuz": "fp8", "e5m2fnuz": "bf8", "fp16": "f16", "bf16": "bf16", "tf32": "xf32"}
_FROM_PTX = {"f64": "fp64", "f32": "fp32",
             "f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "e3m2": "e3m2",
             "e2m3": "e2m3", "e2m1": "e2m1", "fp8": "e4m3fnuz", "bf8": "e5m2fnuz", "xf32": "tf32"}

MODELS = ("random", "cancellation", "huge_tiny", "below_e_zero", "subnormal", "c_dominates", "c_negligible",
          "zero_blocks", "scale_extremes", "special_c")


def missing() -> str | None:
    """Why the mmasim implementation cannot run here (None when it can)."""
    return import_problem("mmasim", ("torch", "mmasim", "mmasim.amd", "mmasim.nv_ptx"), 'pip install "fmtsim[mma]"')


@dataclass(frozen=True)
class Config:
    """One MMA-Sim instruction against one fmtsim unit. op: (class, architecture,
    shape_and_type) as MMA-Sim names them; None: the unit's own ``peer`` instruction."""

    unit: str
    a_format: str
    b_format: str
    scale_format: str | None = None
    block_size: int | None = None
    op: tuple[str, str, str] | None = None

    @property
    def label(self) -> str:
        s = f"{self.unit} {self.a_format}x{self.b_format}"
        if self.scale_format:
            s += f" {self.scale_format}x{self.block_size}"
        if self.op is not None:
            s += f" [{self.op[1]} {self.op[2]}]"
        return s

    def instruction(self) -> tuple[str, str, str]:
        if self.op is not None:
            return self.op
        u = UNITS[self.unit]
        m = re.fullmatch(r"(\w+)\('([^']+)', '([^']+)'\)", u.peer)
        if m is None:
            raise ValueError(f"mmasim has no instruction for unit {self.unit}")
        table = AMD if m.group(1) == "MFMA" else PTX
        s = "ue8m0" if self.scale_format == "e8m0" else "ue4m3"
        st = m.group(3).format(a=table.get(self.a_format, self.a_format), b=table.get(self.b_format, self.b_format),
                               bs=self.block_size, s=s)
        return m.group(1), m.group(2), st


# ---- the instructions MMA-Sim 2.1.1 lists, and the fmtsim unit for each ------------------
# (mmasim/nv_ptx/isa_mma.py, isa_wgmma.py, isa_tcgen05mma.py, mmasim/amd/isa_mfma.py; for
# wgmma and tcgen05.mma every N from 8 to 256 is the same arithmetic: N = 8 stands for all)

_F8F6F4_PTX = ["e5m2", "e4m3", "e3m2", "e2m3", "e2m1"]
_SM70 = ["m8n8k4.f32.f16.f16.f32", "m8n8k4.f32.f16.f16.f16", "m8n8k4.f16.f16.f16.f16"]
_SM75 = ["m16n8k8.f32.f16.f16.f32", "m16n8k8.f16.f16.f16.f16"]
_SM80 = ["m8n8k4.f64.f64.f64.f64", "m16n8k8.f32.tf32.tf32.f32", "m16n8k4.f32.tf32.tf32.f32",
         "m16n8k16.f32.f16.f16.f32", "m16n8k16.f16.f16.f16.f16", "m16n8k16.f32.bf16.bf16.f32",
         "m16n8k8.f32.bf16.bf16.f32"]
_SM89 = [f"m16n8k{k}.{d}.{a}.{b}.{d}" for k in (32, 16) for d in ("f32", "f16") for a in ("e5m2", "e4m3")
         for b in ("e5m2", "e4m3")]
_SM90 = ["m16n8k16.f64.f64.f64.f64", "m16n8k8.f64.f64.f64.f64", "m16n8k4.f64.f64.f64.f64"]
_SM120 = [f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}" for d in ("f32", "f16") for a in _F8F6F4_PTX for b in _F8F6F4_PTX]
MMA_LISTS = {"Volta": _SM70, "Turing": _SM75 + _SM70, "Ampere": _SM80 + _SM75, "Ada Lovelace": _SM89 + _SM80 + _SM75,
             "Hopper": _SM90 + _SM80 + _SM75, "Blackwell": _SM80 + _SM75,
             "RTX Blackwell": _SM120 + _SM89 + _SM80 + _SM75}
MMA_BLOCK_SCALE_LISTS = {"RTX Blackwell": (
    [f"m16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0" for a in _F8F6F4_PTX for b in _F8F6F4_PTX]
    + ["m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0", "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
       "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
       "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"])}
WGMMA_LISTS = {"Hopper": ["m64n8k8.f32.tf32.tf32", "m64n8k16.f32.f16.f16", "m64n8k16.f16.f16.f16",
                          "m64n8k16.f32.bf16.bf16"]
               + [f"m64n8k32.{d}.{a}.{b}" for d in ("f32", "f16") for a in ("e5m2", "e4m3") for b in ("e5m2", "e4m3")]}
TCGEN05_LISTS = {"Blackwell": ["m64n8k8.kind::tf32.f32.tf32.tf32", "m64n8k16.kind::f16.f32.f16.f16",
                               "m64n8k16.kind::f16.f32.bf16.bf16", "m64n8k16.kind::f16.f16.f16.f16"]
                 + [f"m64n8k32.kind::f8f6f4.{d}.{a}.{b}" for d in ("f32", "f16") for a in _F8F6F4_PTX
                    for b in _F8F6F4_PTX]}
TCGEN05_BLOCK_SCALE_LISTS = {"Blackwell": (
    [f"m128n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.ue8m0" for a in _F8F6F4_PTX for b in _F8F6F4_PTX]
    + ["m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0", "m128n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.ue8m0",
       "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue8m0", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"])}
_CDNA1 = ["f32_32x32x2f32", "f32_32x32x1f32", "f32_16x16x4f32", "f32_16x16x1f32", "f32_4x4x1f32", "f32_32x32x8f16",
          "f32_32x32x4f16", "f32_16x16x16f16", "f32_16x16x4f16", "f32_4x4x4f16", "f32_32x32x4bf16",
          "f32_32x32x2bf16", "f32_16x16x8bf16", "f32_16x16x2bf16", "f32_4x4x2bf16"]
_CDNA2 = ["f64_16x16x4f64", "f64_4x4x4f64", "f32_32x32x8bf16_1k", "f32_32x32x4bf16_1k", "f32_16x16x16bf16_1k",
          "f32_16x16x4bf16_1k", "f32_4x4x4bf16_1k"]
_CDNA3 = ["f64_16x16x4_f64", "f64_4x4x4_4b_f64", "f32_32x32x1_2b_f32", "f32_16x16x1_4b_f32", "f32_4x4x1_16b_f32",
          "f32_32x32x2_f32", "f32_16x16x4_f32", "f32_16x16x8_xf32", "f32_32x32x4_xf32"] + [
    f"f32_{s}_{t}" for t in ("f16", "bf16") for s in ("32x32x4_2b", "16x16x4_4b", "4x4x4_16b", "32x32x8", "16x16x16")
] + [f"f32_{s}_{a}_{b}" for s in ("16x16x32", "32x32x16") for a in ("bf8", "fp8") for b in ("bf8", "fp8")]
MFMA_LISTS = {"CDNA1": _CDNA1, "CDNA2": _CDNA2 + _CDNA1, "CDNA3": _CDNA3}

# MMA-Sim instructions fmtsim has no unit for: none (the fp32 / fp64 FMA chains, MMA-Sim's
# MMA_FMA, are the fma units sm80_mma_fp64, cdna1_mfma_fp32 and cdna2_mfma_fp64)
NOT_MODELLED: tuple[tuple[str, str, str], ...] = ()


def _nv_unit(cls: str, arch: str, st: str) -> tuple[str, str, str, str | None, int | None] | None:
    """(unit, a_format, b_format, scale_format, block_size) of one NVIDIA instruction."""
    q = st.split(".")
    m, n, k = (int(x) for x in re.fullmatch(r"m(\d+)n(\d+)k(\d+)", q[0]).groups())  # type: ignore[union-attr]
    kind = q[1].removeprefix("kind::") if q[1].startswith("kind::") else None
    rest = q[2:] if kind else q[1:]
    if cls in ("MMABlockScale", "TCGen05MMABlockScale"):
        block = int(rest[0].removeprefix("block"))
        a, b, sfmt = rest[2], rest[3], rest[-1]
        sf = "e8m0" if sfmt == "ue8m0" else "ue4m3"
        pre = "sm120" if cls == "MMABlockScale" else "sm100"
        return f"{pre}_{kind}", a, b, sf, block
    d, a, b = rest[0], rest[1], rest[2]
    c = rest[3] if len(rest) > 3 else d
    if a == "f64":  # DMMA on every architecture and shape: the fp64 FMA chain
        return "sm80_mma_fp64", "fp64", "fp64", None, None
    fa, fb = _FROM_PTX[a], _FROM_PTX[b]
    f16 = "_f16" if d == "f16" else ""
    if cls == "WGMMA":
        kind2 = {"tf32": "tf32", "f16": "fp16", "bf16": "fp16"}.get(a, "fp8")
        return f"sm90_wgmma_{kind2}{f16}", fa, fb, None, None
    if cls == "TCGen05MMA":
        return f"sm100_{kind}{f16}", fa, fb, None, None
    if kind == "f8f6f4":  # RTX Blackwell
        return f"sm120_f8f6f4{f16}", fa, fb, None, None
    volta = arch == "Volta" or (arch == "Turing" and st in _SM70)
    if volta:
        return "sm70_mma_fp16" + ("_f16" if d == "f16" else "_c16" if c == "f16" else ""), fa, fb, None, None
    if arch == "Turing":
        return f"sm75_mma_fp16{f16}", fa, fb, None, None
    if a in ("e4m3", "e5m2"):
        if arch == "Ada Lovelace":
            return f"sm89_mma_fp8{f16}", fa, fb, None, None
        return (f"sm120_f8f6f4{f16}" if k == 32 else f"sm120_mma_fp8_k16{f16}"), fa, fb, None, None
    if arch in ("Ampere", "Ada Lovelace"):
        return ("sm80_mma_tf32" if a == "tf32" else f"sm80_mma_fp16{f16}"), fa, fb, None, None
    # Hopper, Blackwell, RTX Blackwell: 16 two-byte / 8 tf32 products; shorter K fuses K
    if a == "tf32":
        return ("sm90_mma_tf32" if k == 8 else "sm90_mma_tf32_k4"), fa, fb, None, None
    return f"sm90_mma_fp16{f16}" + ("_k8" if k == 8 else ""), fa, fb, None, None


def _amd_unit(arch: str, suffix: str) -> tuple[str, str, str, str | None, int | None] | None:
    q = suffix.split("_")
    if q[-1] in ("fp8", "bf8"):
        return "cdna3_mfma_fp8", _FROM_PTX[q[-2]], _FROM_PTX[q[-1]], None, None
    one_k = q[-1] == "1k"
    t = next((x for x in ("bf16", "f16", "xf32", "f32", "f64") if q[-2 if one_k else -1].endswith(x)), "")
    if t in ("f32", "f64"):  # MMA_FMA on every CDNA: the fp32 / fp64 FMA chains
        return ("cdna1_mfma_fp32" if t == "f32" else "cdna2_mfma_fp64"), _FROM_PTX[t], _FROM_PTX[t], None, None
    fmt = _FROM_PTX[t]
    kk = int(re.match(r"\d+x\d+x(\d+)", q[1]).group(1))  # type: ignore[union-attr]
    if arch == "CDNA1":
        return ("cdna1_mfma_fp16" if t == "f16" else "cdna1_mfma_bf16"), fmt, fmt, None, None
    if arch == "CDNA2":
        return ("cdna2_mfma_bf16" if t == "bf16" and not one_k else "cdna2_mfma_fp16"), fmt, fmt, None, None
    if t == "xf32":
        return "cdna3_mfma_xf32", fmt, fmt, None, None
    return ("cdna3_mfma_fp16_k4" if kk < 8 else "cdna3_mfma_fp16"), fmt, fmt, None, None


def _configs() -> list[Config]:
    out = []
    lists = [("MMA", MMA_LISTS), ("MMABlockScale", MMA_BLOCK_SCALE_LISTS), ("WGMMA", WGMMA_LISTS),
             ("TCGen05MMA", TCGEN05_LISTS), ("TCGen05MMABlockScale", TCGEN05_BLOCK_SCALE_LISTS)]
    for cls, table in lists:
        for arch, sts in table.items():
            for st in sts:
                hit = _nv_unit(cls, arch, st)
                if hit is not None:
                    out.append(Config(*hit, op=(cls, arch, st)))
    for arch, sts in MFMA_LISTS.items():
        for st in sts:
            hit = _amd_unit(arch, st)
            if hit is not None:
                out.append(Config(*hit, op=("MFMA", arch, st)))
    return out


CONFIGS = _configs()


# ---- calling MMA-Sim ------------------------------------------------------------------

def _torch_codes(codes: np.ndarray, fmt: str) -> Any:
    import torch

    if fmt == "fp64":
        t = torch.from_numpy(np.ascontiguousarray(codes.astype(np.uint64)).view(np.int64).copy())
        return t.view(torch.float64)
    if fmt == "fp32":
        t = torch.from_numpy(np.ascontiguousarray(codes.astype(np.uint32)).view(np.int32).copy())
        return t.view(torch.float32)
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
    from mmasim import amd, nv_ptx

    cls, arch, st = cfg.instruction()
    return (amd.MFMA if cls == "MFMA" else getattr(nv_ptx, cls))(arch, st)


def run_mmasim(cfg: Config, a: np.ndarray, b: np.ndarray, c: np.ndarray, sa: np.ndarray | None = None,
               sb: np.ndarray | None = None, op: Any = None) -> np.ndarray:
    """D = A @ B + C through MMA-Sim's instruction for ``cfg`` (codes in, float32 out; tf32
    units take fp32 bit patterns). K is fed one unit step at a time, each step's D the
    next step's C, as a kernel chains instructions (MMA-Sim's own loop over K uses the
    architecture's L_max, longer than a short-K instruction's K)."""
    import torch

    op = op if op is not None else _instruction(cfg)
    u = UNITS[cfg.unit]
    af = "fp32" if cfg.a_format == "tf32" else cfg.a_format
    bf = "fp32" if cfg.b_format == "tf32" else cfg.b_format
    c16 = getattr(op, "c_type", None) == torch.float16
    C = torch.from_numpy(np.ascontiguousarray(c, dtype=u.out_dtype).copy())
    if c16:
        C = C.to(torch.float16)
    L = u.k or a.shape[1]
    if u.family == "fma":  # one instruction of its own K at a time (MMA_FMA loops over it in order)
        L = op.k
    with torch.no_grad():
        for k0 in range(0, a.shape[1], L):
            ks = slice(k0, k0 + L)
            if cfg.scale_format is None:
                C = op(_torch_codes(a[:, ks], af), _torch_codes(b[ks], bf), C)
            else:
                assert sa is not None and sb is not None and cfg.block_size
                bsl = slice(k0 // cfg.block_size, (k0 + L) // cfg.block_size)
                if u.family == "nv":  # mxf8f6f4: codes one per byte
                    C = op(_torch_codes(a[:, ks], cfg.a_format), _torch_codes(b[ks], cfg.b_format), C,
                           _torch_scales(sa[:, bsl], "e8m0"), _torch_scales(sb[bsl], "e8m0"))
                else:  # mxf4 / mxf4nvf4: B's packed bytes run along K: MMA-Sim unpacks the last axis of B.T
                    C = op(_pack_high_first(a[:, ks]), _pack_high_first(b[ks].T).T, C,
                           _torch_scales(sa[:, bsl], cfg.scale_format), _torch_scales(sb[bsl], cfg.scale_format))
    if u.family == "fma":
        return C.numpy().astype(u.out_dtype)
    out = C.float().numpy().astype(np.float32)
    if c16:  # an fp16 NaN widened: write the canonical fp32 NaN as for the fp32 outputs
        out = np.where(np.isnan(out), np.uint32(0x7FFFFFFF).view(np.float32), out).astype(np.float32)
    return out


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


def _fma_model(name: str, cfg: Config, rng: np.random.Generator, m: int, n: int, k: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, None, None]:
    """The coverage models for the fma units: fp32 / fp64 bit patterns (uint32 / uint64) and
    an fp32 / fp64 C, drawn from the whole range of the format where the model asks for it."""
    udt, fdt = IEEE_FORMATS[cfg.a_format]
    wide = fdt == np.float64
    man, emax, emin = (52, 1023, -1022) if wide else (23, 127, -126)
    sign = np.uint64(1 << 63) if wide else np.uint32(1 << 31)

    def vals(shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
        v = rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * np.exp2(rng.integers(lo, hi + 1, shape))
        return v.astype(fdt)

    def subnormal(shape: tuple[int, ...]) -> np.ndarray:
        frac = rng.integers(1, 1 << man, shape, dtype=np.uint64).astype(udt)
        return np.where(rng.random(shape) < 0.5, frac | sign, frac).astype(udt).view(fdt)

    def codes(shape: tuple[int, ...]) -> np.ndarray:
        hi = np.iinfo(udt).max
        return rng.integers(0, hi, shape, dtype=np.uint64, endpoint=True).astype(udt)

    a, b = vals((m, k), -20, 20), vals((k, n), -20, 20)
    c = vals((m, n), -10, 10)
    if name == "random":
        A, B, C = codes((m, k)), codes((k, n)), codes((m, n)).view(fdt)
        C = np.where(rng.random((m, n)) < 0.25, fdt.type(0), C).astype(fdt)
        return A, B, C, None, None
    if name == "cancellation":  # pairs of products that cancel, a few tiny ones, C zero or cancelling too
        perm = rng.permutation(k)
        p, q = perm[: k // 2], perm[k // 2: 2 * (k // 2)]
        a[:, q], b[q] = -a[:, p], b[p]
        a[:, q[:2]] = vals((m, min(2, q.size)), emin, emin + 4)
        c = np.where(rng.random((m, n)) < 0.5, fdt.type(0), -(a[:, :1] * b[:1, :]).astype(fdt)).astype(fdt)
    elif name == "huge_tiny":  # the smallest products around the largest one (near the ends of the range)
        a, b = subnormal((m, k)), vals((k, n), man // 2, emax // 2)
        pos = rng.integers(0, k, m)
        a[np.arange(m), pos] = vals((m,), emax // 2, emax - 2)
        c = np.where(rng.random((m, n)) < 0.5, fdt.type(0), vals((m, n), emin - man // 2, emin + 2)).astype(fdt)
    elif name == "subnormal":  # subnormal factors against ones that lift the product to the normal boundary
        a = subnormal((m, k))
        b = np.where(rng.random((k, n)) < 0.5, subnormal((k, n)), vals((k, n), 0, man + 4)).astype(fdt)
        c = np.where(rng.random((m, n)) < 0.5, fdt.type(0), subnormal((m, n))).astype(fdt)
    elif name == "c_dominates":  # C near the top of the range: products vanish below it, or overflow it
        c = vals((m, n), emax - 40, emax)
        a[:, ::3] = vals((m, a[:, ::3].shape[1]), emax // 2 - 2, emax // 2)
        b[::3] = vals((b[::3].shape[0], n), emax // 2 - 2, emax // 2)
    elif name == "c_negligible":  # subnormal C under large products
        a = vals((m, k), emax // 4, emax // 2)
        c = subnormal((m, n))
    elif name == "zero_blocks":  # +0 and -0 factors and C (IEEE zero signs)
        zero = np.array([0.0, -0.0], fdt)
        a[rng.random((m, k)) < 0.4] = 0
        a = np.where(a == 0, rng.choice(zero, (m, k)), a).astype(fdt)
        b[rng.random((k, n)) < 0.3] = 0
        b = np.where(b == 0, rng.choice(zero, (k, n)), b).astype(fdt)
        c = np.where(rng.random((m, n)) < 0.6, rng.choice(zero, (m, n)), c).astype(fdt)
    elif name == "special_c":
        a[:, ::2] = vals((m, a[:, ::2].shape[1]), emax // 2, emax - 1)
        c = rng.choice(np.array([np.nan, np.inf, -np.inf, 1.0, -0.0], fdt), (m, n))
    else:
        raise ValueError(f"the fma units have no coverage model {name!r}")
    return a.view(udt), b.view(udt), c, None, None


def _model(name: str, cfg: Config, rng: np.random.Generator, m: int, n: int, k: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    if UNITS[cfg.unit].family == "fma":
        return _fma_model(name, cfg, rng, m, n, k)
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
    u = UNITS[cfg.unit]
    if u.c_format == "fp16":  # the instruction's C is fp16: the model's C rounded there (beyond: +-Inf)
        with np.errstate(over="ignore"):
            c = c.astype(np.float16).astype(np.float32)
    if cfg.a_format == "tf32":  # tf32 units take fp32 patterns: random low 13 bits, which they drop
        a = (a.astype(np.int64) << 13) | rng.integers(0, 1 << 13, a.shape)
    if cfg.b_format == "tf32":
        b = (b.astype(np.int64) << 13) | rng.integers(0, 1 << 13, b.shape)
    return a, b, c, sa, sb


def _sign_bit(fmt: str) -> int:
    return {"tf32": 0x40000, "fp16": 0x8000, "bf16": 0x8000, "e3m2": 0x20, "e2m3": 0x20, "e2m1": 0x8}.get(fmt, 0x80)


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


def _bits(x: np.ndarray) -> np.ndarray:
    """The bit patterns of float32 (uint32) or float64 (uint64, the fp64 fma units) outputs."""
    return x.view(np.uint64 if x.dtype == np.float64 else np.uint32)


def _canonical_nan(x: np.ndarray) -> int:
    return 0x7FFFFFFFFFFFFFFF if x.dtype == np.float64 else 0x7FFFFFFF


def _nan_payload(ours: np.ndarray, theirs: np.ndarray, ctx: dict[str, Any]) -> np.ndarray:
    return np.isnan(ours) & np.isnan(theirs) & (_bits(theirs) != _canonical_nan(theirs))


MMA_DIVERGENCES: list[MMADivergence] = [
    MMADivergence(
        "mmasim.nan_payload",
        ("cdna1_mfma_fp16", "cdna1_mfma_bf16", "cdna2_mfma_fp16", "cdna2_mfma_bf16", "sm80_mma_fp64",
         "cdna1_mfma_fp32", "cdna2_mfma_fp64"),
        "MMA-Sim 2.1.1's CDNA1 (e_fdpa) and CDNA2 (MMA_FTZ_MUL_ADD) models, and its FMA chains "
        "(MMA_FMA: std::fma), return the NaN that the CPU's float arithmetic makes (the x86 "
        "default NaN 0xFFC00000 / 0xFFF8000000000000, or an input NaN's payload), not the "
        "canonical 0x7FFFFFFF its other models write. Both are NaN; fmtsim writes 0x7FFFFFFF "
        "(fp64 units: 0x7FFFFFFFFFFFFFFF) for every NaN result of every unit.",
        _nan_payload,
    ),
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
        ("cdna3_mfma_fp8", "cdna3_mfma_fp16", "cdna3_mfma_fp16_k4", "cdna3_mfma_xf32"),
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
    # an fma unit's step is one FMA: K a multiple of 16 feeds every instruction's K (1 .. 16) whole
    return (16, 8, (16 if u.family == "fma" else u.k) * steps)


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
    af = "fp32" if cfg.a_format == "tf32" else cfg.a_format
    bf = "fp32" if cfg.b_format == "tf32" else cfg.b_format
    ours = matmul(a, b, c, unit=cfg.unit, a_format=af, b_format=bf, a_scales=sa, b_scales=sb,
                  scale_format=cfg.scale_format, block_size=cfg.block_size)
    theirs = run_mmasim(cfg, a, b, c, sa, sb, op)
    ob, tb = _bits(ours), _bits(theirs)
    same = (ob == tb) | (np.isnan(ours) & np.isnan(theirs) & (tb == _canonical_nan(theirs)))
    return same, ours, theirs


def mmasim_rows(units: list[str] | None = None, big: bool = True, seed: int = 10) -> list[Any]:
    """One Row per (unit, formats, model): fmtsim.mma against MMA-Sim, output bits."""
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
        except Exception:  # no tqdm, or a broken one: no bar
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
            return (f"D[{i // nn}, {i % nn}]: fmtsim {int(_bits(fo[i:i + 1])[0]):#010x} ({fo[i]!r}), "
                    f"mmasim {int(_bits(ft[i:i + 1])[0]):#010x} ({ft[i]!r})")
        row.add(same.reshape(-1), {k: v.reshape(-1) for k, v in known.items()}, describe)
    return list(rows.values())


# ---- the conform implementation -------------------------------------------------------

class Mmasim(Implementation):
    name = "mmasim"
    summary = "MMA-Sim's matrix-instruction models (NVIDIA sm_89..sm_100, AMD CDNA3) against fmtsim.mma"
    requires = ("torch", "mmasim")
    imports = ("mmasim.amd", "mmasim.nv_ptx")
    install = 'pip install "fmtsim[mma]"'
    capabilities = ("gemm",)
    checked_with = "mmasim 2.1.1"

    def gemm_rows(self, req: Request) -> list[Row]:
        return mmasim_rows(None if req.units is None else list(req.units) or None, big=req.big)


IMPLEMENTATIONS = [Mmasim()]
