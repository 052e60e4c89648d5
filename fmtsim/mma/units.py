"""What a matrix unit IS: one declarative record per named unit.

A unit is the arithmetic of one matrix instruction (a fused dot-product-add step,
FDPA): how many products it fuses (``k``), how they are aligned and truncated
(``fraction_bits``), which exponent a zero term gets (``e_zero``), how block scales
and the accumulator C join, and how the result is rounded (``output``). The numbers
come from the published bit-accurate models: Fasi, Higham, Mikaitis and Pranesh,
"Numerical behavior of NVIDIA tensor cores" (PeerJ Computer Science 7:e330, 2021);
Khattak and Mikaitis, "Accurate models of NVIDIA tensor cores" (arXiv:2512.07004);
Xie et al., "MMA-Sim" (arXiv:2511.10909), whose PyPI package ``mmasim`` 2.1.1 is the
peer these records are checked against (``fmtsim conform --impl mmasim``).

Families (one exact step implementation each, in :mod:`fmtsim.mma.step`):

    exact        every product and C summed exactly, one RNE rounding to fp32 over
                 the whole K (fmtsim's reference answer; not a hardware unit)
    nv           NVIDIA tensor core: the ``k`` products (each exact, times its
                 block's scale product when scaled) and C aligned together to the
                 largest exponent, each truncated toward zero to ``fraction_bits``
                 bits below it, summed exactly, then rounded by ``output``
    nv_grouped   NVIDIA ``mxf4`` / ``mxf4nvf4``: each group of ``group`` FP4
                 products summed exactly, multiplied by its scale product, then
                 fused with C as in ``nv``; a group's alignment exponent is that
                 of its scale product
    amd          AMD CDNA3 MFMA: products aligned and truncated (``fraction_bits``)
                 per group (``even_odd``: the even and the odd products apart,
                 combined rounding down), then C joined rounding down to
                 ``fraction_bits2 + 1`` bits, normalised rounding down to
                 ``fraction_bits2`` bits, and rounded to nearest even into fp32
    ftz          AMD CDNA2 MFMA fp16/bf16: each product rounded to fp32, then
                 ``k`` (2 or 4) of them added pairwise in fp32 and the pair sum
                 added to C, every fp32 result below 2^-126 flushed to zero
                 (subnormal inputs and C flushed to +0 first)

    fma          a chain of exactly rounded fused multiply-adds, D = fma(a_k, b_k, D) for
                 k = 0, 1, ... in order, each rounded once to nearest even in the
                 accumulator's format (fp32 or fp64) with IEEE 754 subnormals, signed
                 zeros, Inf and NaN: NVIDIA fp64 ``mma`` (DMMA) and AMD fp32 / fp64 MFMA,
                 as MMA-Sim models them (its ``MMA_FMA``); ``k`` is 1 (one FMA per step:
                 an instruction of K products is K steps, so every shape is the same unit)

``exact`` with ``k`` > 0 is a hardware unit too: AMD CDNA1 MFMA sums ``k`` products
and C exactly and rounds once (RNE fp32) per step.

Outputs: ``rz_fp32`` / ``rz_e8m13`` (truncation toward zero, e8m13: fp32 with its 10 low
fraction bits cleared), ``rne_fp32``, and ``rne_fp16`` (the ``.f16`` forms of the
instructions: nearest even fp16, overflow to +-Inf; the result is an fp16 value held in
float32), and ``rne_fp64`` (the fp64 fma units: D and C are float64). ``c_format`` is
the format of the C the instruction takes: an fp16 C's exponent is clamped at fp16's -14
when it joins (MMA-Sim's ``frexp_and_normalize`` of an fp16 tensor), which moves the
alignment point for a subnormal C. ``tf32_inputs``: the unit takes ``tf32`` codes (19
bits: sign, 8 exponent, 10 fraction), or ``fp32`` codes (uint32 bit patterns) whose 13
low bits it drops first, as MMA-Sim's ``truncate_fp32_to_tf32``. A step's ``k`` is the
instruction's L = min(K, L_max): an instruction with a shorter K than L_max fuses only K
products, so it is its own unit (``..._k8``).

Where the sources differ. Khattak-Mikaitis model NVIDIA V100 to B200 for 8-, 16- and
19-bit inputs; MMA-Sim also models FP6/FP4, the block-scaled kinds and AMD CDNA. For
the NVIDIA FP8 and fp16/bf16 units the parameters below are the ones both give (L, F,
output rounding, e_zero). Where only MMA-Sim has a model, fmtsim follows its
arithmetic, and departs from it only where its float64 emulation shows through
(named in fmtsim.conformance.impls.mmasim: a NaN/Inf accumulator dropped on CDNA3 FP8,
the sign of a zero result on AMD), keeping IEEE rules there. One open question: for RTX
Blackwell's block-scaled FP4 mma (m16n8k64) MMA-Sim's groups of 16 with F=35 and a
public RTX 5090 probe's 25 bits (huweim/emulation_sys) disagree; the sm120_ records
follow MMA-Sim and the probe set ``sm120_mxf4nvf4`` (fmtsim.mma.probe) decides it on
the GPU. MMA-Sim's FMA chains (fp64 mma, fp32/fp64 MFMA) are the ``fma`` units; their
operands are fp32 / fp64 bit patterns (uint32 / uint64 codes), never narrowed.

Exponents: an operand's exponent is that of its normalised form, clamped at its
format's smallest normal exponent (subnormals keep the minimum exponent and a
significand below 1); a product's alignment exponent is the sum of its factors'
exponents (so a product's significand lies in [0, 4)).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Literal, get_args

import numpy as np

__all__ = ["Unit", "UNITS", "get_unit", "F8F6F4", "unit_names"]

Family = Literal["exact", "nv", "nv_grouped", "amd", "ftz", "fma"]
Output = Literal["rne_fp32", "rz_fp32", "rz_e8m13", "rne_fp16", "rne_fp64"]
_EMIN = {"fp16": -14, "fp32": -126, "fp64": -1022}
_FMA_FORMATS = {"fp32": "rne_fp32", "fp64": "rne_fp64"}  # fma units: operand format -> output

F8F6F4 = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")

_KM = "Khattak and Mikaitis, arXiv:2512.07004"
_FHMP = "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021)"
_MMASIM = "mmasim 2.1.1"


@dataclass(frozen=True, eq=False)
class Unit:
    """One named matrix unit (see the module docstring for the families)."""

    name: str
    family: Family
    k: int  # products fused per step (the instruction's K); 0: the whole K at once
    fraction_bits: int = 0  # F: bits kept below the largest exponent after alignment
    e_zero: int = 0  # exponent of a zero term (the lowest alignment point)
    output: Output = "rne_fp32"
    formats: tuple[str, ...] = ()  # operand formats a and b may each take ("*": any)
    scale_formats: tuple[str, ...] = ()  # () unscaled; else the scale formats it takes
    block_sizes: tuple[int, ...] = ()  # scale block sizes along K
    group: int = 0  # nv_grouped: products summed exactly before scaling
    even_odd: bool = False  # amd: even and odd products aligned as two groups
    fraction_bits2: int = 0  # amd: bits kept when C joins and after normalisation
    drop_small_c: bool = False  # amd fp8: C below e_max - F - 1 is dropped before it joins
    product_overflow_inf: bool = False  # amd fp16/bf16: a product >= 2^128 is +-Inf
    c_format: str = "fp32"  # the format of C the instruction takes (fp32, fp16; fp64 for fp64 fma units)
    tf32_inputs: bool = False  # takes tf32 codes, or fp32 bit patterns truncated to tf32 first
    peer: str = ""  # the mmasim instruction that models it
    title: str = ""
    source: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def scaled(self) -> bool:
        return bool(self.scale_formats)

    def takes(self, fmt: str) -> bool:
        return "*" in self.formats or fmt in self.formats or (self.tf32_inputs and fmt == "fp32")

    @property
    def out_emin(self) -> int:
        """Smallest normal exponent of the output format (fp16: -14, else -126)."""
        return {"rne_fp16": -14, "rne_fp64": -1022}.get(self.output, -126)

    @property
    def c_emin(self) -> int:
        """Smallest normal exponent of the C the instruction takes."""
        return _EMIN[self.c_format]

    @property
    def out_dtype(self) -> np.dtype:
        """The dtype D (and C) are held in: float64 for the fp64 units, else float32."""
        return np.dtype(np.float64 if self.output == "rne_fp64" else np.float32)

    def check_operands(self, a_format: str, b_format: str, scale_format: str | None = None) -> None:
        """ValueError when this unit's fraction_bits cannot hold the exact products of these operand
        formats (the steps shift products left by F minus the products' own fraction bits)."""
        from .arith import operand_table

        if self.family not in ("nv_grouped", "amd"):
            return  # nv shifts right when F is below the products' bits; exact keeps every bit
        ta, tb = operand_table(a_format), operand_table(b_format)
        if self.family == "amd":
            need = ta.man_bits + tb.man_bits
        else:
            smax = max((operand_table(s).man_bits for s in ((scale_format,) if scale_format else self.scale_formats)),
                       default=0)
            need = (ta.man_bits - ta.emin) + (tb.man_bits - tb.emin) + 2 * smax
        if self.fraction_bits < need:
            raise ValueError(f"Unit {self.name!r}: fraction_bits={self.fraction_bits} is below the {need} fraction "
                             f"bits of a {a_format} x {b_format} product the {self.family} step keeps exactly")

    def __repr__(self) -> str:
        return f"Unit({self.name!r})"


_INT_FIELDS = ("k", "fraction_bits", "e_zero", "group", "fraction_bits2")
_BOOL_FIELDS = ("even_odd", "drop_small_c", "product_overflow_inf", "tf32_inputs")
_SCALE_FORMATS = ("e8m0", "ue4m3")
_E_ZERO_LIMIT = 1 << 16  # far below any product exponent, far above mma.arith.ZERO_EXP (-2^20)
# the families whose steps (fast and Fraction twin alike) read a field; elsewhere it keeps its default,
# so that a record cannot carry a setting one of the two paths would honour and the other ignore
_READ_BY = {"fraction_bits": ("nv", "nv_grouped", "amd"), "e_zero": ("nv", "nv_grouped"), "group": ("nv_grouped",),
            "fraction_bits2": ("amd",), "even_odd": ("amd",), "drop_small_c": ("amd",),
            "product_overflow_inf": ("amd",)}
_DEFAULTS = {f.name: f.default for f in fields(Unit)}


def _validate(u: Unit) -> None:
    """Every field of a Unit in range, so that the integer step models (mma.step) stay exact in
    int64: a record they would silently overflow on, or that no family reads, is refused here."""
    from .arith import canonical_operand_format

    def bad(name: str, why: str) -> ValueError:
        return ValueError(f"Unit {u.name!r}: {name}={getattr(u, name)!r} {why}")

    for fld in fields(u):
        v = getattr(u, fld.name)
        if fld.name in _INT_FIELDS:
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise TypeError(f"Unit {u.name!r}: {fld.name} must be an integer, not {type(v).__name__}")
            object.__setattr__(u, fld.name, int(v))
        elif fld.name in _BOOL_FIELDS:
            if not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"Unit {u.name!r}: {fld.name} must be True or False, not {type(v).__name__}")
            object.__setattr__(u, fld.name, bool(v))
        elif fld.name in ("name", "peer", "title", "source", "family", "output", "c_format"):
            if not isinstance(v, str):
                raise TypeError(f"Unit: {fld.name} must be a string, not {type(v).__name__}")
        else:  # formats, scale_formats, block_sizes
            if isinstance(v, (str, bytes)) or not isinstance(v, (tuple, list)):
                raise TypeError(f"Unit {u.name!r}: {fld.name} must be a tuple, not {type(v).__name__}")
            object.__setattr__(u, fld.name, tuple(v))
    if not u.name:
        raise ValueError("Unit: name must not be empty")
    if u.family not in get_args(Family):
        raise bad("family", f"is not a family; families: {', '.join(get_args(Family))}")
    if u.output not in get_args(Output):
        raise bad("output", f"is not an output rounding; outputs: {', '.join(get_args(Output))}")
    if u.c_format not in _EMIN:
        raise bad("c_format", f"is not a C format; C formats: {', '.join(_EMIN)}")
    for name in u.formats:
        try:
            ok = isinstance(name, str) and (name == "*" or canonical_operand_format(name) == name)
        except ValueError:
            ok = False
        if not ok:
            raise bad("formats", f"holds {name!r}, not a canonical operand format name (or '*')")
    for name in u.scale_formats:
        if name not in _SCALE_FORMATS:
            raise bad("scale_formats", f"holds {name!r}; scale formats: {', '.join(_SCALE_FORMATS)}")
    for bs in u.block_sizes:
        if isinstance(bs, bool) or not isinstance(bs, numbers.Integral) or bs < 1:
            raise bad("block_sizes", "must hold positive integers")
    if bool(u.scale_formats) != bool(u.block_sizes):
        raise bad("block_sizes", f"and scale_formats={u.scale_formats!r} must be given together")
    if u.k < 0 or (u.k == 0 and u.family != "exact"):
        raise bad("k", "must be at least 1 (0, the whole K at once, is for the exact family only)")
    if u.fraction_bits < 0 or u.fraction_bits2 < 0 or u.group < 0:
        name = "fraction_bits" if u.fraction_bits < 0 else "fraction_bits2" if u.fraction_bits2 < 0 else "group"
        raise bad(name, "must not be negative")
    if not -_E_ZERO_LIMIT < u.e_zero < _E_ZERO_LIMIT:
        raise bad("e_zero", f"must lie strictly between -{_E_ZERO_LIMIT} and {_E_ZERO_LIMIT}")
    f, terms = u.fraction_bits, (u.k + 1).bit_length()
    if u.family == "nv" and f + 4 + terms > 53:
        raise bad("fraction_bits", f"is too wide for k={u.k}: each of the k + 1 aligned terms is an integer below "
                  "2^(F + 4) and the step sums them exactly in float64 (F + 4 + bit_length(k + 1) <= 53)")
    if u.family == "nv_grouped":
        if u.group < 1 or u.k % u.group:
            raise bad("group", f"must be a positive divisor of k={u.k} for the nv_grouped family")
        if not u.scale_formats:
            raise bad("scale_formats", "must name the block scales: the nv_grouped family scales each group")
        if any(bs % u.group for bs in u.block_sizes):
            raise bad("block_sizes", f"must be multiples of group={u.group}")
        # a step holds whole scale blocks (k=48 or k=16 with blocks of 32 failed inside numpy)
        if any(u.k % bs for bs in u.block_sizes):
            raise bad("block_sizes", f"must divide k={u.k} for the nv_grouped family (a step holds whole blocks)")
        # a group's term is |sum| * scale product << (F - fraction bits): below 2^(F + bit_length(group * 144))
        if f + (u.group * 144).bit_length() + (u.k // u.group + 1).bit_length() > 63:
            raise bad("fraction_bits", f"is too wide for k={u.k}, group={u.group}: the group terms' sum must "
                      "fit in 64 bits")
    if u.family == "fma":
        if len(u.formats) != 1 or u.formats[0] not in _FMA_FORMATS:
            raise bad("formats", "must be ('fp32',) or ('fp64',) for the fma family (an FMA takes one format)")
        fmt = u.formats[0]
        if u.output != _FMA_FORMATS[fmt] or u.c_format != fmt:
            raise bad("output", f"and c_format={u.c_format!r} must be {_FMA_FORMATS[fmt]!r} and {fmt!r} for "
                      f"{fmt} fma units (each FMA rounds once into the accumulator's format)")
        if u.k != 1:
            raise bad("k", "must be 1 for the fma family (one FMA per step)")
        if u.scale_formats or u.tf32_inputs:
            raise bad("scale_formats" if u.scale_formats else "tf32_inputs", "is not for the fma family")
    else:
        if "fp64" in (u.output[-4:], u.c_format) or any(f in _FMA_FORMATS for f in u.formats):
            raise bad("family", "takes fp32 / fp64 operands or output only as 'fma' (tf32 units: tf32_inputs)")
    if u.family == "ftz" and u.k not in (2, 4):  # pairs, or pairs of pairs (k=8 dropped six products of eight)
        raise bad("k", "must be 2 or 4 for the ftz family (products added in pairs, or pairs of pairs)")
    if u.family == "amd":
        if u.even_odd and u.k < 2:
            raise bad("k", "must be at least 2 with even_odd (one even and one odd product per group)")
        if u.fraction_bits2 + 4 + terms > 63:
            raise bad("fraction_bits2", f"is too wide for k={u.k}: the sum must fit in 64 bits")
        # the products' sum joins C on the F2 + 1 grid; F beyond it would shift right by a negative count
        if u.fraction_bits > u.fraction_bits2 + 1:
            raise bad("fraction_bits", f"is wider than fraction_bits2 + 1 = {u.fraction_bits2 + 1} (the grid the "
                      "products' sum joins C on)")
        # each of a group's at most k terms is an integer below 2^(F + 2), summed in float64
        if u.fraction_bits + 2 + u.k.bit_length() > 53:
            raise bad("fraction_bits", f"is too wide for k={u.k}: each aligned term is an integer below 2^(F + 2) and "
                      "the step sums them exactly in float64 (F + 2 + bit_length(k) <= 53)")
    for name, readers in _READ_BY.items():
        if u.family not in readers and getattr(u, name) != _DEFAULTS[name]:
            raise bad(name, f"is not read by the {u.family} family (only by {', '.join(readers)}); leave it at "
                      f"{_DEFAULTS[name]!r}")
    for name in u.formats:
        if name != "*":
            u.check_operands(name, name)


_RECORDS = [
    Unit("exact", "exact", 0, formats=("*",), scale_formats=("e8m0", "ue4m3"), block_sizes=(16, 32),
         title="exact sum of every product and C, one RNE rounding to fp32",
         source="fmtsim's reference (not a hardware unit)"),
    Unit("sm89_mma_fp8", "nv", 16, 13, -132, "rz_e8m13", ("e4m3", "e5m2"),
         peer="MMA('Ada Lovelace', 'm16n8k32.f32.{a}.{b}.f32')",
         title="Ada (sm_89) mma FP8, fp32 accumulate",
         source=f"{_KM}; {_MMASIM} nv_ptx/sim.py (Ada FP8: F=13, RZ-E8M13, 16 bytes per step, e_zero -132)"),
    Unit("sm90_wgmma_fp8", "nv", 32, 13, -133, "rz_e8m13", ("e4m3", "e5m2"),
         peer="WGMMA('Hopper', 'm64n8k32.f32.{a}.{b}')",
         title="Hopper (sm_90) wgmma FP8, fp32 accumulate (13 fraction bits kept)",
         source=f"{_KM}; {_MMASIM} nv_ptx/sim.py WGMMA; DeepSeek-V3 report 3.5.2 (about 14 bits kept)"),
    Unit("sm90_wgmma_fp16", "nv", 16, 25, -133, "rz_fp32", ("fp16", "bf16"),
         peer="WGMMA('Hopper', 'm64n8k16.f32.{a}.{b}')",
         title="Hopper (sm_90) wgmma fp16/bf16, fp32 accumulate",
         source=f"{_FHMP} (method); {_KM}; {_MMASIM} nv_ptx/sim.py WGMMA"),
    Unit("sm100_f8f6f4", "nv", 32, 25, -133, "rz_fp32", F8F6F4,
         peer="TCGen05MMA('Blackwell', 'm64n8k32.kind::f8f6f4.f32.{a}.{b}')",
         title="Blackwell (sm_100) tcgen05.mma kind::f8f6f4, fp32 accumulate (sm_120 mma: sm120_f8f6f4)",
         source=f"{_KM}; {_MMASIM} nv_ptx/sim.py TCGen05MMA / MMA('RTX Blackwell')"),
    Unit("sm100_mxf8f6f4", "nv", 32, 25, -133, "rz_fp32", F8F6F4, ("e8m0",), (32,),
         peer="TCGen05MMABlockScale('Blackwell', 'm128n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.ue8m0')",
         title="Blackwell kind::mxf8f6f4: E8M0 per 32, scale product applied to each product before alignment",
         source=f"{_KM}; {_MMASIM} arithmetic/fdpa.py st_fdpa (MMA_ST_FDPA F=25, e_zero -133)"),
    Unit("sm100_mxf4", "nv_grouped", 64, 35, -139, "rz_fp32", ("e2m1",), ("e8m0",), (32,), group=16,
         peer="TCGen05MMABlockScale('Blackwell', 'm128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0')",
         title="Blackwell kind::mxf4 (E8M0 per 32): groups of 16 summed exactly, scaled, fused with F=35",
         source=f"{_KM}; {_MMASIM} arithmetic/fdpa.py gst_fdpa (MMA_GST_FDPA G=16, F=35, e_zero -139)"),
    Unit("sm100_mxf4nvf4", "nv_grouped", 64, 35, -139, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"), (16, 32),
         group=16,
         peer="TCGen05MMABlockScale('Blackwell', 'm128n8k64.kind::mxf4nvf4.block{bs}.f32.e2m1.e2m1.{s}')",
         title="Blackwell kind::mxf4nvf4 (E8M0 x32, E8M0 x16, UE4M3 x16; UE4M3 bit 7 ignored)",
         source=f"{_KM}; {_MMASIM} arithmetic/fdpa.py gst_fdpa, helper.truncate_e4m3_to_ue4m3"),
    Unit("cdna3_mfma_fp8", "amd", 16, 24, 0, "rne_fp32", ("e4m3fnuz", "e5m2fnuz"), even_odd=True,
         fraction_bits2=31, drop_small_c=True,
         peer="MFMA('CDNA3', 'f32_16x16x32_{a}_{b}')",
         title="AMD CDNA3 (MI300) MFMA FP8/BF8 (FNUZ): even and odd groups of 8, C added after, RNE",
         source=f"{_MMASIM} arithmetic/fdpa.py gtr_fdpa (MMA_GTR_FDPA F=24, F2=31, L=16); Xie et al. 2511.10909"),
    Unit("cdna3_mfma_fp16", "amd", 8, 24, 0, "rne_fp32", ("fp16", "bf16"), fraction_bits2=31,
         product_overflow_inf=True,
         peer="MFMA('CDNA3', 'f32_16x16x16_{a}')",
         title="AMD CDNA3 (MI300) MFMA fp16/bf16: 8 products, F=24, C added after rounding down, RNE",
         source=f"{_MMASIM} arithmetic/fdpa.py tr_fdpa (MMA_TR_FDPA F=24, F2=31, L=8); Xie et al. 2511.10909"),
]


# ---- every further instruction MMA-Sim 2.1.1 models --------------------------------------
# NVIDIA mma / wgmma / tcgen05.mma: mmasim/nv_ptx/sim.py, classes MMA, WGMMA, TCGen05MMA and
# MMABlockScale, from its tables _mma_F_bits (F), _mma_L_max_bytes (L_max = bytes / operand
# size), _mma_e_zero_for_fp32 and _mma_e_zero_for_fp16 (e_zero by generation and output);
# the instruction lists are mmasim/nv_ptx/isa_mma.py, isa_wgmma.py, isa_tcgen05mma.py.
_SIM = f"{_MMASIM} nv_ptx/sim.py"
_TF32 = "fp32 inputs truncated to tf32 (arithmetic/helper.py truncate_fp32_to_tf32)"


def _nv(name: str, k: int, f: int, ez: int, out: Output, formats: tuple[str, ...], peer: str, title: str,
        cls: str, **kw: object) -> Unit:
    c16 = out == "rne_fp16"
    src = f"{_SIM} {cls} (F={f}, L={k}, e_zero {ez}, {'RNE-FP16' if c16 else out.upper().replace('_', '-')})"
    if kw.get("tf32_inputs"):
        src += f"; {_TF32}"
    return Unit(name, "nv", k, f, ez, out, formats, peer=peer, title=title, source=f"{_KM}; {src}",
                **({"c_format": "fp16"} if c16 else {}), **kw)  # type: ignore[arg-type]


_16 = ("fp16", "bf16")
_FP8 = ("e4m3", "e5m2")
_RECORDS += [
    # Volta (sm_70): F=23, 4 two-byte products per step; Turing's m8n8k4 falls back to these
    _nv("sm70_mma_fp16", 4, 23, -131, "rz_fp32", ("fp16",), "MMA('Volta', 'm8n8k4.f32.f16.f16.f32')",
        "Volta (sm_70; Turing m8n8k4 the same) mma fp16, fp32 accumulate", "MMA"),
    _nv("sm70_mma_fp16_c16", 4, 23, -131, "rz_fp32", ("fp16",), "MMA('Volta', 'm8n8k4.f32.f16.f16.f16')",
        "Volta (sm_70) mma fp16, fp16 C, fp32 D", "MMA", c_format="fp16"),
    _nv("sm70_mma_fp16_f16", 4, 23, -19, "rne_fp16", ("fp16",), "MMA('Volta', 'm8n8k4.f16.f16.f16.f16')",
        "Volta (sm_70) mma fp16, fp16 accumulate (RNE to fp16)", "MMA"),
    # Turing (sm_75): F=24, 8 products
    _nv("sm75_mma_fp16", 8, 24, -132, "rz_fp32", ("fp16",), "MMA('Turing', 'm16n8k8.f32.f16.f16.f32')",
        "Turing (sm_75) mma m16n8k8 fp16, fp32 accumulate", "MMA"),
    _nv("sm75_mma_fp16_f16", 8, 24, -20, "rne_fp16", ("fp16",), "MMA('Turing', 'm16n8k8.f16.f16.f16.f16')",
        "Turing (sm_75) mma m16n8k8 fp16, fp16 accumulate", "MMA"),
    # Ampere (sm_80) and Ada (sm_89): F=24, 8 two-byte (4 tf32) products, e_zero -132 / -20
    _nv("sm80_mma_fp16", 8, 24, -132, "rz_fp32", _16, "MMA('Ampere', 'm16n8k16.f32.{a}.{b}.f32')",
        "Ampere (sm_80) and Ada (sm_89) mma fp16/bf16, fp32 accumulate", "MMA"),
    _nv("sm80_mma_fp16_f16", 8, 24, -20, "rne_fp16", ("fp16",), "MMA('Ampere', 'm16n8k16.f16.f16.f16.f16')",
        "Ampere (sm_80) and Ada (sm_89) mma fp16, fp16 accumulate", "MMA"),
    _nv("sm80_mma_tf32", 4, 24, -132, "rz_fp32", ("tf32",), "MMA('Ampere', 'm16n8k8.f32.tf32.tf32.f32')",
        "Ampere (sm_80) and Ada (sm_89) mma tf32 (fp32 truncated to tf32), fp32 accumulate", "MMA",
        tf32_inputs=True),
    _nv("sm89_mma_fp8_f16", 16, 13, -20, "rne_fp16", _FP8, "MMA('Ada Lovelace', 'm16n8k32.f16.{a}.{b}.f16')",
        "Ada (sm_89) mma FP8, fp16 accumulate (F=13, RNE to fp16)", "MMA"),
    # Hopper (sm_90) mma.sync, and Blackwell sm_100 / sm_120 mma on the same types: F=25,
    # 16 two-byte (8 tf32) products; a K=8 (K=4 tf32) instruction fuses only that many
    _nv("sm90_mma_fp16", 16, 25, -133, "rz_fp32", _16, "MMA('Hopper', 'm16n8k16.f32.{a}.{b}.f32')",
        "Hopper (sm_90; Blackwell sm_100/sm_120 the same) mma.sync m16n8k16 fp16/bf16, fp32 accumulate", "MMA"),
    _nv("sm90_mma_fp16_k8", 8, 25, -133, "rz_fp32", _16, "MMA('Hopper', 'm16n8k8.f32.{a}.{b}.f32')",
        "Hopper (sm_90; sm_100/sm_120 the same) mma.sync m16n8k8 fp16/bf16: 8 products per step", "MMA"),
    _nv("sm90_mma_fp16_f16", 16, 25, -21, "rne_fp16", ("fp16",), "MMA('Hopper', 'm16n8k16.f16.f16.f16.f16')",
        "Hopper (sm_90; sm_100/sm_120 the same) mma.sync m16n8k16 fp16, fp16 accumulate", "MMA"),
    _nv("sm90_mma_fp16_f16_k8", 8, 25, -21, "rne_fp16", ("fp16",), "MMA('Hopper', 'm16n8k8.f16.f16.f16.f16')",
        "Hopper (sm_90; sm_100/sm_120 the same) mma.sync m16n8k8 fp16, fp16 accumulate", "MMA"),
    _nv("sm90_mma_tf32", 8, 25, -133, "rz_fp32", ("tf32",), "MMA('Hopper', 'm16n8k8.f32.tf32.tf32.f32')",
        "Hopper (sm_90; sm_100/sm_120 the same) mma.sync m16n8k8 tf32", "MMA", tf32_inputs=True),
    _nv("sm90_mma_tf32_k4", 4, 25, -133, "rz_fp32", ("tf32",), "MMA('Hopper', 'm16n8k4.f32.tf32.tf32.f32')",
        "Hopper (sm_90; sm_100/sm_120 the same) mma.sync m16n8k4 tf32: 4 products per step", "MMA",
        tf32_inputs=True),
    # Hopper wgmma: 32 bytes per step; fp16 output e_zero -21
    _nv("sm90_wgmma_fp16_f16", 16, 25, -21, "rne_fp16", ("fp16",), "WGMMA('Hopper', 'm64n8k16.f16.f16.f16')",
        "Hopper (sm_90) wgmma fp16, fp16 accumulate", "WGMMA"),
    _nv("sm90_wgmma_tf32", 8, 25, -133, "rz_fp32", ("tf32",), "WGMMA('Hopper', 'm64n8k8.f32.tf32.tf32')",
        "Hopper (sm_90) wgmma tf32, fp32 accumulate", "WGMMA", tf32_inputs=True),
    _nv("sm90_wgmma_fp8_f16", 32, 13, -21, "rne_fp16", _FP8, "WGMMA('Hopper', 'm64n8k32.f16.{a}.{b}')",
        "Hopper (sm_90) wgmma FP8, fp16 accumulate (F=13, RNE to fp16)", "WGMMA"),
    # Blackwell (sm_100) tcgen05.mma
    _nv("sm100_tf32", 8, 25, -133, "rz_fp32", ("tf32",), "TCGen05MMA('Blackwell', 'm64n8k8.kind::tf32.f32.tf32.tf32')",
        "Blackwell (sm_100) tcgen05.mma kind::tf32", "TCGen05MMA", tf32_inputs=True),
    _nv("sm100_f16", 16, 25, -133, "rz_fp32", _16, "TCGen05MMA('Blackwell', 'm64n8k16.kind::f16.f32.{a}.{b}')",
        "Blackwell (sm_100) tcgen05.mma kind::f16 fp16/bf16, fp32 accumulate", "TCGen05MMA"),
    _nv("sm100_f16_f16", 16, 25, -21, "rne_fp16", ("fp16",),
        "TCGen05MMA('Blackwell', 'm64n8k16.kind::f16.f16.f16.f16')",
        "Blackwell (sm_100) tcgen05.mma kind::f16 fp16, fp16 accumulate", "TCGen05MMA"),
    _nv("sm100_f8f6f4_f16", 32, 25, -21, "rne_fp16", F8F6F4,
        "TCGen05MMA('Blackwell', 'm64n8k32.kind::f8f6f4.f16.{a}.{b}')",
        "Blackwell (sm_100) tcgen05.mma kind::f8f6f4, fp16 accumulate", "TCGen05MMA"),
    # RTX Blackwell (sm_120) mma: its own shapes (m16n8k32, m16n8k64)
    _nv("sm120_f8f6f4", 32, 25, -133, "rz_fp32", F8F6F4,
        "MMA('RTX Blackwell', 'm16n8k32.kind::f8f6f4.f32.{a}.{b}.f32')",
        "RTX Blackwell (sm_120) mma m16n8k32 kind::f8f6f4 (and its m16n8k32 e4m3/e5m2), fp32 accumulate", "MMA"),
    _nv("sm120_f8f6f4_f16", 32, 25, -21, "rne_fp16", F8F6F4,
        "MMA('RTX Blackwell', 'm16n8k32.kind::f8f6f4.f16.{a}.{b}.f16')",
        "RTX Blackwell (sm_120) mma m16n8k32 kind::f8f6f4, fp16 accumulate", "MMA"),
    _nv("sm120_mma_fp8_k16", 16, 25, -133, "rz_fp32", _FP8, "MMA('RTX Blackwell', 'm16n8k16.f32.{a}.{b}.f32')",
        "RTX Blackwell (sm_120) mma m16n8k16 FP8: 16 products per step, fp32 accumulate", "MMA"),
    _nv("sm120_mma_fp8_k16_f16", 16, 25, -21, "rne_fp16", _FP8, "MMA('RTX Blackwell', 'm16n8k16.f16.{a}.{b}.f16')",
        "RTX Blackwell (sm_120) mma m16n8k16 FP8, fp16 accumulate", "MMA"),
    Unit("sm120_mxf8f6f4", "nv", 32, 25, -133, "rz_fp32", F8F6F4, ("e8m0",), (32,),
         peer="MMABlockScale('RTX Blackwell', 'm16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0')",
         title="RTX Blackwell (sm_120) mma m16n8k32 kind::mxf8f6f4 (E8M0 per 32)",
         source=f"{_SIM} MMABlockScale (k=32: MMA_ST_FDPA F=25, e_zero -133); arithmetic/fdpa.py st_fdpa"),
    Unit("sm120_mxf4", "nv_grouped", 64, 35, -139, "rz_fp32", ("e2m1",), ("e8m0",), (32,), group=16,
         peer="MMABlockScale('RTX Blackwell', 'm16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0')",
         title="RTX Blackwell (sm_120) mma m16n8k64 kind::mxf4: groups of 16 exact, F=35 (MMA-Sim; "
               "a hardware probe reports 25 bits, README)",
         source=f"{_SIM} MMABlockScale (k=64: MMA_GST_FDPA G=16, F=35, e_zero -139)"),
    Unit("sm120_mxf4nvf4", "nv_grouped", 64, 35, -139, "rz_fp32", ("e2m1",), ("e8m0", "ue4m3"), (16, 32),
         group=16,
         peer="MMABlockScale('RTX Blackwell', 'm16n8k64.kind::mxf4nvf4.block{bs}.f32.e2m1.e2m1.f32.{s}')",
         title="RTX Blackwell (sm_120) mma m16n8k64 kind::mxf4nvf4: groups of 16 exact, F=35 (MMA-Sim; "
               "a hardware probe reports 25 bits, README)",
         source=f"{_SIM} MMABlockScale (k=64: MMA_GST_FDPA G=16, F=35, e_zero -139); "
                "huweim/emulation_sys bit_width_test_/README.md (RTX 5090: 25 bits, RZ)"),
    # AMD MFMA: mmasim/amd/sim.py MFMA picks the arithmetic by architecture and type;
    # instruction lists in mmasim/amd/isa_mfma.py
    Unit("cdna1_mfma_fp16", "exact", 4, formats=("fp16",), peer="MFMA('CDNA1', 'f32_32x32x8f16')",
         title="AMD CDNA1 (MI100) MFMA fp16: 4 products and C summed exactly, one RNE rounding per step",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA1 fp16: MMA_E_FDPA L_max=4); arithmetic/fdpa.py e_fdpa"),
    Unit("cdna1_mfma_bf16", "exact", 2, formats=("bf16",), peer="MFMA('CDNA1', 'f32_32x32x4bf16')",
         title="AMD CDNA1 (MI100) MFMA bf16: 2 products and C summed exactly, one RNE rounding per step",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA1 bf16: MMA_E_FDPA L_max=2); arithmetic/fdpa.py e_fdpa"),
    Unit("cdna2_mfma_fp16", "ftz", 4, formats=("fp16", "bf16"), peer="MFMA('CDNA2', 'f32_32x32x8f16')",
         title="AMD CDNA2 (MI200) MFMA fp16 and bf16_1k: fp32 products added in fours, flush to zero",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA2 fp16, bf16 _1k: MMA_FTZ_MUL_ADD P=4); "
                "arithmetic/ftz_mul_add.py"),
    Unit("cdna2_mfma_bf16", "ftz", 2, formats=("bf16",), peer="MFMA('CDNA2', 'f32_32x32x4bf16')",
         title="AMD CDNA2 (MI200) MFMA bf16 (not _1k): fp32 products added in pairs, flush to zero",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA2 bf16: MMA_FTZ_MUL_ADD P=2); arithmetic/ftz_mul_add.py"),
    Unit("cdna3_mfma_fp16_k4", "amd", 4, 24, 0, "rne_fp32", _16, fraction_bits2=31, product_overflow_inf=True,
         peer="MFMA('CDNA3', 'f32_32x32x4_2b_{a}')",
         title="AMD CDNA3 (MI300) MFMA fp16/bf16 with K=4 (the _2b/_4b/_16b forms): 4 products per step",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA3: MMA_TR_FDPA F=24, F2=31, L=min(K, 8))"),
    Unit("cdna3_mfma_xf32", "amd", 4, 24, 0, "rne_fp32", ("tf32",), fraction_bits2=31, product_overflow_inf=True,
         tf32_inputs=True, peer="MFMA('CDNA3', 'f32_16x16x8_xf32')",
         title="AMD CDNA3 (MI300) MFMA xf32 (fp32 truncated to tf32): 4 products, F=24, C after, RNE",
         source=f"{_MMASIM} amd/sim.py MFMA (CDNA3 xf32: MMA_TR_FDPA F=24, F2=31, L_max=4); {_TF32}"),
]

# ---- the FMA chains: MMA-Sim 2.1.1 arithmetic/fma.py MMA_FMA (c = fma(a[..., i], b[..., i], c)
# for i = 0 .. K-1, std::fma per element: arithmetic/fma_cpu.cpp), chosen by nv_ptx/sim.py MMA
# for an fp64 a_type and by amd/sim.py MFMA for fp32 (not xf32) and fp64 a_type
_FMA = f"{_MMASIM} arithmetic/fma.py MMA_FMA (K exactly rounded FMAs in order k = 0 .. K-1; fma_cpu.cpp std::fma)"
_RECORDS += [
    Unit("sm80_mma_fp64", "fma", 1, output="rne_fp64", formats=("fp64",), c_format="fp64",
         peer="MMA('Ampere', 'm8n8k4.f64.f64.f64.f64')",
         title="NVIDIA fp64 mma (DMMA; Ampere sm_80 to RTX Blackwell m8n8k4, Hopper m16n8k4/k8/k16): "
               "a chain of exactly rounded fp64 FMAs",
         source=f"{_SIM} MMA (a_type float64: fma.MMA_FMA); {_FMA}"),
    Unit("cdna1_mfma_fp32", "fma", 1, formats=("fp32",), peer="MFMA('CDNA1', 'f32_32x32x2f32')",
         title="AMD CDNA1-3 (MI100 / MI200 / MI300) MFMA fp32 (not xf32): a chain of exactly rounded fp32 FMAs",
         source=f"{_MMASIM} amd/sim.py MFMA (a_type float32, suffix not xf32: fma.MMA_FMA); {_FMA}"),
    Unit("cdna2_mfma_fp64", "fma", 1, output="rne_fp64", formats=("fp64",), c_format="fp64",
         peer="MFMA('CDNA2', 'f64_16x16x4f64')",
         title="AMD CDNA2-3 (MI200 / MI300) MFMA fp64: a chain of exactly rounded fp64 FMAs",
         source=f"{_MMASIM} amd/sim.py MFMA (a_type float64: fma.MMA_FMA); {_FMA}"),
]

# read-only: a caller's UNITS["x"] = ... would change every later matmul by that name
_BY_NAME: dict[str, Unit] = {u.name: u for u in _RECORDS}
UNITS: MappingProxyType[str, Unit] = MappingProxyType(_BY_NAME)


def unit_names() -> list[str]:
    return list(UNITS)


def get_unit(unit: str | Unit) -> Unit:
    """A Unit from its name (case-insensitive); unknown names raise ValueError listing the names."""
    if isinstance(unit, Unit):
        return unit
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a name or a Unit, not {type(unit).__name__}")
    key = unit.strip().lower()
    if key not in UNITS:
        raise ValueError(f"unknown matrix unit {unit!r}; known units: {', '.join(UNITS)}")
    return UNITS[key]
