"""GEMM vector files per named matrix unit (``*.gemm.bin``), and their verification.

One raw little-endian binary file per (unit, operand formats, scales), arrays listed in
the manifest (name, dtype, shape, byte offset) like the other binary vector files:

    a_codes   (M, K) uint8 (uint16 for fp16/bf16), one code per element, unpacked
    b_codes   (K, N) likewise
    a_scales  (M, K / block) uint8, b_scales (K / block, N) uint8   (block-scaled units)
    c         (M, N) float32: the accumulator C
    d         (M, N) float32: D = A @ B + C as the named unit computes it, chained along K
    d_exact   (M, N) float32: the exact sum rounded once (RNE)
    d_bound   (M, N) float32: the model-family tolerance around d_exact (NaN: the exact
              special result is asked; +Inf: anything, the sum may overflow in a chain)

``fmtsim ver FILE RESULTS`` compares a device's ``d`` bit for bit (any NaN matches NaN);
with ``--family-tolerance`` it asks |d - d_exact| <= d_bound instead, for a device whose
unit is not one of the named ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..arrays import as_numpy
from ..mma import UNITS, matmul
from ..mma.arith import FINITE, IEEE_FORMATS, canonical_operand_format, operand_table
from ..mma.gemm import ORDER_EXPLANATIONS
from ..mma.slow import exact_ieee_sum
from ..mma.tolerance import F_MIN, L_MIN, family_bound, fma_bound

__all__ = ["GEMM_CASES", "ORDER_EXPLANATIONS", "explain_gemm", "gemm_files", "verify_gemm"]

GEMM_CASES: list[tuple[str, str, str, str | None, int | None]] = [
    ("exact", "e4m3", "e4m3", None, None),
    ("sm89_mma_fp8", "e4m3", "e5m2", None, None),
    ("sm90_wgmma_fp8", "e4m3", "e4m3", None, None),
    ("sm90_wgmma_fp8", "e5m2", "e4m3", None, None),
    ("sm90_wgmma_fp16", "fp16", "fp16", None, None),
    ("sm90_wgmma_fp16", "bf16", "bf16", None, None),
    ("sm100_f8f6f4", "e4m3", "e4m3", None, None),
    ("sm100_f8f6f4", "e3m2", "e2m3", None, None),
    ("sm100_f8f6f4", "e2m1", "e2m1", None, None),
    ("sm100_mxf8f6f4", "e4m3", "e4m3", "e8m0", 32),
    ("sm100_mxf8f6f4", "e2m1", "e5m2", "e8m0", 32),
    ("sm100_mxf4", "e2m1", "e2m1", "e8m0", 32),
    ("sm100_mxf4nvf4", "e2m1", "e2m1", "e8m0", 16),
    ("sm100_mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
    ("cdna3_mfma_fp8", "e4m3fnuz", "e5m2fnuz", None, None),
    ("cdna3_mfma_fp16", "fp16", "fp16", None, None),
    ("cdna3_mfma_fp16", "bf16", "bf16", None, None),
    # every further unit MMA-Sim models, one file each (two for the fp16/bf16 units taking both)
    ("sm70_mma_fp16", "fp16", "fp16", None, None),
    ("sm70_mma_fp16_c16", "fp16", "fp16", None, None),
    ("sm70_mma_fp16_f16", "fp16", "fp16", None, None),
    ("sm75_mma_fp16", "fp16", "fp16", None, None),
    ("sm75_mma_fp16_f16", "fp16", "fp16", None, None),
    ("sm80_mma_fp16", "fp16", "fp16", None, None),
    ("sm80_mma_fp16", "bf16", "bf16", None, None),
    ("sm80_mma_fp16_f16", "fp16", "fp16", None, None),
    ("sm80_mma_tf32", "tf32", "tf32", None, None),
    ("sm89_mma_fp8_f16", "e4m3", "e5m2", None, None),
    ("sm90_mma_fp16", "fp16", "fp16", None, None),
    ("sm90_mma_fp16", "bf16", "bf16", None, None),
    ("sm90_mma_fp16_k8", "bf16", "bf16", None, None),
    ("sm90_mma_fp16_f16", "fp16", "fp16", None, None),
    ("sm90_mma_fp16_f16_k8", "fp16", "fp16", None, None),
    ("sm90_mma_tf32", "tf32", "tf32", None, None),
    ("sm90_mma_tf32_k4", "tf32", "tf32", None, None),
    ("sm90_wgmma_fp16_f16", "fp16", "fp16", None, None),
    ("sm90_wgmma_tf32", "tf32", "tf32", None, None),
    ("sm90_wgmma_fp8_f16", "e4m3", "e4m3", None, None),
    ("sm100_tf32", "tf32", "tf32", None, None),
    ("sm100_f16", "bf16", "bf16", None, None),
    ("sm100_f16_f16", "fp16", "fp16", None, None),
    ("sm100_f8f6f4_f16", "e2m1", "e4m3", None, None),
    ("sm120_f8f6f4", "e4m3", "e4m3", None, None),
    ("sm120_f8f6f4", "e2m1", "e2m1", None, None),
    ("sm120_f8f6f4_f16", "e3m2", "e2m3", None, None),
    ("sm120_mma_fp8_k16", "e5m2", "e4m3", None, None),
    ("sm120_mma_fp8_k16_f16", "e4m3", "e4m3", None, None),
    ("sm120_mxf8f6f4", "e4m3", "e2m1", "e8m0", 32),
    ("sm120_mxf4", "e2m1", "e2m1", "e8m0", 32),
    ("sm120_mxf4nvf4", "e2m1", "e2m1", "e8m0", 32),
    ("sm120_mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
    ("cdna1_mfma_fp16", "fp16", "fp16", None, None),
    ("cdna1_mfma_bf16", "bf16", "bf16", None, None),
    ("cdna2_mfma_fp16", "fp16", "fp16", None, None),
    ("cdna2_mfma_fp16", "bf16", "bf16", None, None),
    ("cdna2_mfma_bf16", "bf16", "bf16", None, None),
    ("cdna3_mfma_fp16_k4", "fp16", "fp16", None, None),
    ("cdna3_mfma_xf32", "tf32", "tf32", None, None),
    # the FMA chains: fp32 / fp64 bit patterns, an fp32 / fp64 C and D
    ("sm80_mma_fp64", "fp64", "fp64", None, None),
    ("cdna1_mfma_fp32", "fp32", "fp32", None, None),
    ("cdna2_mfma_fp64", "fp64", "fp64", None, None),
]

M, N, STEPS = 16, 8, 4


def gemm_name(unit: str, a: str, b: str, sf: str | None, bs: int | None) -> str:
    return f"{unit}.{a}x{b}" + (f".{sf}x{bs}" if sf else "") + ".gemm.bin"


def _operands(rng: np.random.Generator, a_fmt: str, b_fmt: str, k: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of A: 0-7 random finite codes (fp16/bf16: within 2^+-16), 8 the largest magnitudes, 9 the smallest
    nonzero, 10 one largest among the smallest, 11 zeros, 12 pairs that cancel against B's
    columns 0-3 (B's rows paired equal there), 13 subnormals, 14-15 any code (NaN/Inf
    included). Columns of B: random finite, column 7 zeros. C: random, with zeros, one
    huge and one tiny."""
    ta, tb = operand_table(a_fmt), operand_table(b_fmt)

    def pick(t: Any, pred: Any) -> np.ndarray:
        fin = t.cls == FINITE
        v = np.abs(np.where(fin, t.values, 0.0))
        sel = np.nonzero(fin & pred(v, t.sig, t.man_bits))[0]
        return sel if sel.size else np.nonzero(fin)[0]

    def ordinary(v: np.ndarray, s: np.ndarray, m: int) -> np.ndarray:
        # fp16/bf16 codes over the whole range would overflow most sums: rows 0-7 stay within 2^+-16
        return (v == 0) | ((v >= 2.0**-16) & (v <= 2.0**16))

    fa, fb = pick(ta, ordinary), pick(tb, ordinary)
    a = rng.choice(fa, (M, k))
    b = rng.choice(fb, (k, N))
    big = pick(ta, lambda v, s, m: v >= v.max() / 2)
    small = pick(ta, lambda v, s, m: (v > 0) & (v <= v[v > 0].min() * 2))
    a[8] = rng.choice(big, k)
    a[9] = rng.choice(small, k)
    a[10] = rng.choice(small, k)
    a[10, rng.integers(0, k)] = rng.choice(big)
    a[11] = 0
    sign = {"tf32": 0x40000, "fp16": 0x8000, "bf16": 0x8000, "e3m2": 0x20, "e2m3": 0x20, "e2m1": 0x8}.get(a_fmt, 0x80)
    nz = pick(ta, lambda v, s, m: v > 0)
    a[12, 0::2] = rng.choice(nz, (k + 1) // 2)
    a[12, 1::2] = a[12, 0::2][: k // 2] ^ sign
    b[1::2, :4] = b[0::2, :4][: k // 2]
    a[13] = rng.choice(pick(ta, lambda v, s, m: (v > 0) & (s < (1 << m))), k)
    a[14:] = rng.integers(0, ta.n_codes, (2, k))
    b[:, 7] = 0
    c = (rng.standard_normal((M, N)) * 2.0 ** rng.integers(-10, 10, (M, N))).astype(np.float32)
    c[rng.random((M, N)) < 0.3] = 0
    c[3, 3], c[4, 4] = np.float32(3.0e30), np.float32(1.5e-40)
    return a, b, c


def _fma_operands(rng: np.random.Generator, fmt: str, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of :func:`_operands` for fp32 / fp64 patterns: 0-7 values within 2^+-16, 8 near
    the largest, 9 the smallest subnormals, 10 one near the largest among them, 11 zeros (+0
    and -0), 12 pairs that cancel against B's columns 0-3, 13 subnormals against B, 14-15 any
    pattern (NaN/Inf included). B random within 2^+-16, column 7 zeros. C random, with zeros,
    one near the top of the range and one subnormal."""
    udt, fdt = IEEE_FORMATS[fmt]
    wide = fdt == np.float64
    man, emax = (52, 1023) if wide else (23, 127)

    def vals(shape: Any, lo: int, hi: int) -> np.ndarray:
        v = rng.choice([-1.0, 1.0], shape) * (1 + rng.random(shape)) * np.exp2(rng.integers(lo, hi + 1, shape))
        return np.asarray(v).astype(fdt)

    def subnormal(shape: Any) -> np.ndarray:
        frac = rng.integers(1, 1 << man, shape, dtype=np.uint64).astype(udt)
        sign = np.where(rng.random(shape) < 0.5, 1 << (8 * udt.itemsize - 1), 0).astype(udt)
        return np.asarray(frac | sign).view(fdt)

    a, b = vals((M, k), -16, 16), vals((k, N), -16, 16)
    a[8] = vals(k, emax - 2, emax - 1)
    a[9] = rng.integers(1, 4, k).astype(udt).view(fdt)
    a[10] = a[9]
    a[10, rng.integers(0, k)] = vals(1, emax - 2, emax - 1)[0]
    a[11] = np.where(rng.random(k) < 0.5, 0.0, -0.0).astype(fdt)
    a[12, 1::2] = -a[12, 0::2][: k // 2]
    b[1::2, :4] = b[0::2, :4][: k // 2]
    a[13] = subnormal(k)
    A = a.view(udt).copy()
    A[14:] = rng.integers(0, np.iinfo(udt).max, (2, k), dtype=np.uint64, endpoint=True).astype(udt)
    b[:, 7] = 0
    c = vals((M, N), -10, 10)
    c[rng.random((M, N)) < 0.3] = 0
    c[3, 3], c[4, 4] = vals(1, emax - 1, emax - 1)[0], subnormal(1)[0]
    return A, b.view(udt), c


def gemm_files(seed: int = 10) -> Iterator[Any]:
    from .vectors import VectorFile, _binary

    for ci, (unit, af, bf, sf, bs) in enumerate(GEMM_CASES):
        u = UNITS[unit]
        fma = u.family == "fma"
        k = (16 if fma else u.k or 16) * STEPS
        rng = np.random.default_rng([seed, ci])
        a, b, c = _fma_operands(rng, af, k) if fma else _operands(rng, af, bf, k)
        if u.c_format == "fp16":  # the instruction's C is fp16: C within its range, its subnormal smallest
            c = np.clip(c, -60000, 60000).astype(np.float16).astype(np.float32)
            c[4, 4] = np.float32(2.0**-24)
        sa = sb = None
        if sf and bs:
            if sf == "e8m0":
                sa = rng.integers(120, 135, (M, k // bs))
                sb = rng.integers(120, 135, (k // bs, N))
                sa[1, 0], sa[2, 0], sb[0, 5], sa[15, 1] = 0x00, 0xFE, 0x01, 0xFF
            else:
                sa = rng.integers(0x30, 0x48, (M, k // bs))
                sb = rng.integers(0x30, 0x48, (k // bs, N))
                sa[1, 0], sa[2, :] = 0x01, sa[2, :] | 0x80  # a subnormal scale; bit 7 set (ignored)
            sa, sb = sa.astype(np.uint8), sb.astype(np.uint8)
        kw: dict[str, Any] = dict(a_format=af, b_format=bf, a_scales=sa, b_scales=sb, scale_format=sf,
                                  block_size=bs)
        d = matmul(a, b, c, unit=unit, **kw)
        if fma:  # the exact sum rounded once into the unit's format; the FMA-chain bound (float64)
            d_exact = exact_ieee_sum(a, b, c, af)
            b32 = fma_bound(a, b, c, af)
        else:
            d_exact = matmul(a, b, c, unit="exact", **kw)
            bound = family_bound(a, b, c, af, bf, sa, sb, sf, bs)
            with np.errstate(over="ignore"):
                b32 = bound.astype(np.float32)
            b32 = np.where(b32.astype(np.float64) < bound, np.nextafter(b32, np.float32(np.inf)), b32)
        dt = {"fp16": np.uint16, "bf16": np.uint16, "tf32": np.uint32, "fp32": np.uint32,
              "fp64": np.uint64}.get(canonical_operand_format(af), np.uint8)
        arrays: list[tuple[str, np.ndarray]] = [("a_codes", a.astype(dt)), ("b_codes", b.astype(dt))]
        if sa is not None and sb is not None:
            arrays += [("a_scales", sa), ("b_scales", sb)]
        arrays += [("c", c), ("d", d), ("d_exact", d_exact), ("d_bound", b32.astype(np.float64 if fma else np.float32))]
        data, layout = _binary(arrays)
        params = {"name": u.name, "family": u.family, "k": u.k, "fraction_bits": u.fraction_bits,
                  "e_zero": u.e_zero, "output": u.output, "group": u.group, "even_odd": u.even_odd,
                  "fraction_bits2": u.fraction_bits2, "source": u.source}
        if u.c_format != "fp32" or u.tf32_inputs or fma:
            params.update(c_format=u.c_format, tf32_inputs=u.tf32_inputs)
        yield VectorFile(gemm_name(unit, af, bf, sf, bs), data, {
            "operation": "unit_gemm", "unit": params, "a_format": af, "b_format": bf,
            "scale_format": sf, "block_size": bs, "M": M, "N": N, "K": k,
            "d": "D = A @ B + C on the unit, its steps chained along K (each step's result is the "
                 "next step's C; fp16 outputs are fp16 values held in float32); NaN results are 0x7FFFFFFF",
            "tolerance": (f"named unit: d bit for bit (any NaN matches NaN); --family-tolerance: "
                          f"|d - d_exact| <= d_bound (F >= {F_MIN}, L >= {L_MIN}; vectors/README.md)") if not fma else
                         ("named unit: d bit for bit (any NaN matches NaN); --family-tolerance: |d - d_exact| "
                          "<= d_bound, the bound of a chain of K exactly rounded FMAs "
                          "(fmtsim.mma.tolerance.fma_bound)"),
            "layout": ("codes one per element (FP4/FP6 in the low bits of a byte; tf32: the fp32 pattern "
                       "shifted right by 13, load code << 13 as fp32), row-major") if not fma else
                      (f"a_codes / b_codes: {af} bit patterns (uint{8 * np.dtype(dt).itemsize}), one per element; "
                       f"c, d, d_exact: {u.out_dtype}; d_bound: float64; row-major"),
            "coverage_model": "unit_gemm", "cases": M * N, "arrays": layout})


def verify_gemm(exp: dict[str, np.ndarray], got: dict[str, np.ndarray], family: bool
                ) -> tuple[np.ndarray, list[str]]:
    """(ok mask, reasons) for a device's d against a unit_gemm file's arrays."""
    e, g = exp["d"], got["d"]
    u = f"u{e.itemsize}"  # uint32 patterns, uint64 for the fp64 units' D
    if not family:
        ok = (e.view(u) == g.view(u)) | (np.isnan(e) & np.isnan(g))
    else:
        ref, bound = exp["d_exact"], exp["d_bound"].astype(np.float64)
        with np.errstate(invalid="ignore"):
            near = np.abs(g.astype(np.float64) - ref.astype(np.float64)) <= bound
        same = (ref.view(u) == g.view(u)) | (np.isnan(ref) & np.isnan(g))
        ok = np.where(np.isnan(bound), same, np.isinf(bound) | near | same)
    return ok, []


def explain_gemm(exp: dict[str, np.ndarray], got: dict[str, np.ndarray], meta: dict[str, Any]) -> list[str]:
    """The step orders and epilogues (:data:`ORDER_EXPLANATIONS`) under which the file's unit
    gives the device's D on every output, bit for bit, as ``fmtsim mma matmul`` options: a kernel
    that walks K backwards, adds C after the chain or splits K is named for what it does."""
    unit = (meta.get("unit") or {}).get("name")
    if not isinstance(unit, str) or unit not in UNITS:
        return []
    kw: dict[str, Any] = dict(a_format=meta["a_format"], b_format=meta["b_format"],
                              a_scales=exp.get("a_scales"), b_scales=exp.get("b_scales"),
                              scale_format=meta.get("scale_format"), block_size=meta.get("block_size"))
    g = got["d"]
    u = f"u{g.itemsize}"
    found = []
    for option, how in ORDER_EXPLANATIONS:
        try:
            d = matmul(exp["a_codes"], exp["b_codes"], exp["c"], unit=unit, **kw, **how)
        except ValueError:  # an option the unit does not take (an epilogue C for an fp16 D; K in one step)
            continue
        if ((d.view(u) == g.view(u)) | (np.isnan(d) & np.isnan(g))).all():
            found.append(f"fmtsim mma matmul --unit {unit} {option}")
    return found


def ulps_apart(x: Any, y: Any) -> np.ndarray:
    """How many fp32 steps lie between float32 x and y (the bit patterns ordered across the signs:
    -0 and +0 are 0 apart). A NaN on either side gives -1: NaN is no distance from anything.
    Inputs must already be float32 (a GEMM output), or both float64 (an fp64 unit's D: fp64
    steps, as Python integers): other dtypes raise TypeError rather than being rounded into
    float32 first, which could hide the very difference asked about."""
    xs, ys = as_numpy(x, "x"), as_numpy(y, "y")
    if xs.dtype == np.float64 and ys.dtype == np.float64:
        def key64(v: np.ndarray) -> np.ndarray:
            mag = (v.view(np.uint64) & np.uint64(0x7FFFFFFFFFFFFFFF)).astype(object)
            return np.where(np.signbit(v), -mag, mag)

        with np.errstate(invalid="ignore"):
            nan64 = np.isnan(xs) | np.isnan(ys)
        return np.where(nan64, -1, np.abs(key64(xs) - key64(ys)))
    for name, v in (("x", xs), ("y", ys)):
        if v.dtype != np.float32:
            raise TypeError(f"ulps_apart: {name} must be float32 (fp32 outputs), or x and y both float64 "
                            f"(fp64 outputs), not {v.dtype} (x {xs.dtype}, y {ys.dtype})")

    def key(v: np.ndarray) -> np.ndarray:
        u = v.view(np.uint32).astype(np.int64)
        return np.where(u >= 0x80000000, 0x80000000 - u, u)

    with np.errstate(invalid="ignore"):
        nan = np.isnan(xs) | np.isnan(ys)
    return np.where(nan, -1, np.abs(key(xs) - key(ys)))
