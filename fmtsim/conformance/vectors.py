"""Golden vector files: generation (``fmtsim gen``) and verification (``fmtsim ver``).

Scalar conversions are text files in Berkeley TestFloat's shape, one case per
line, fields separated by one space, uppercase hex:

    encode   <input bits> <code> <flags>            f32_to_e4m3.rne.satfinite.encode_ties.tv
    encode   <input bits> <rbits> <code> <flags>    (rounding sr: 8 hex digits of random bits)
    decode   <code> <float32 bits> <flags>          e4m3_to_f32.decode_all.tv

Input bits are the source type's pattern (4 digits for float16/bfloat16, 8 for
float32, 16 for float64); codes are 2 digits (4 for formats wider than a byte, whose
codes are uint16: Binary16p11se); flags 2 digits (bit 0 inexact,
1 underflow, 2 overflow, 3 infinite, 4 invalid, 5 saturated). Block schemes are
raw little-endian binary files whose arrays the manifest lists (name, dtype,
shape, byte offset). vectors/README.md documents both completely.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import __version__
from ..bitpatterns import SOURCE_TAGS, BitPattern, flags_text, short_value
from ..codec import decode, encode, encode_with_flags
from ..fileio import atomic_write, check_replaceable
from ..formats import Format, get_format, power_text
from ..layout import pack_fp4
from ..mma.tolerance import family_bound
from ..policy import resolve
from .models import boundary_points, float64_extent, random_float32

__all__ = ["VectorFile", "level1_files", "write_vectors", "read_tv", "verify_lines", "verify_results",
           "verify_binary", "result_kind", "load_manifest", "format_params", "policy_files"]

SRC = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
       "f64": np.dtype(np.float64)}
SRC_NAME = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass
class VectorFile:
    name: str
    text: bytes
    meta: dict[str, Any] = field(default_factory=dict)


def code_digits(fmt: str | Format) -> int:
    """Hex digits of a code in vector files: 2 for byte formats, 4 for uint16 ones."""
    return 2 * get_format(fmt).code_dtype.itemsize


def format_params(fmt: str) -> dict[str, Any]:
    f = get_format(fmt)
    w = code_digits(f)
    return {"name": f.name, "bits": f.bits, "kind": f.kind, "exp_bits": f.exp_bits, "man_bits": f.man_bits,
            "bias": f.bias, "signed": f.signed, "nan_codes": [f"0x{c:0{w}X}" for c in f.nan_codes],
            "inf_codes": [f"0x{c:0{w}X}" for c in f.inf_codes], "scale_exp": f.scale_exp}


def _hex(bits: np.ndarray, width: int) -> list[str]:
    return [format(int(b), f"0{width}X") for b in bits]


def _encode_lines(x: np.ndarray, src: str, fmt: str, rounding: str | None, overflow: str | None, nan: str | None,
                  rbits: np.ndarray | None = None, profile: str | None = None) -> bytes:
    codes, flags = encode_with_flags(x, fmt, rounding=rounding, overflow=overflow, nan=nan, rbits=rbits,
                                     profile=profile)
    width = SRC[src].itemsize * 2
    ins = _hex(x.view(UINT[SRC[src].itemsize]), width)
    w = code_digits(fmt)
    rows = []
    for i, (c, f) in enumerate(zip(np.asarray(codes).tolist(), np.asarray(flags).tolist(), strict=True)):
        mid = f" {int(rbits[i]):08X}" if rbits is not None else ""
        rows.append(f"{ins[i]}{mid} {c:0{w}X} {f:02X}")
    return ("\n".join(rows) + "\n").encode()


def _encode_file(model: str, x: np.ndarray, src: str, fmt: str, rounding: str | None, overflow: str | None,
                 rbits: np.ndarray | None = None, profile: str | None = None,
                 rbits_seed: int | None = None) -> VectorFile:
    """One encode .tv file. Under rounding sr without ``rbits``, the random bits are drawn from
    ``rbits_seed`` (numpy's default_rng([seed, cases]); a third all-zero bits, a third all-one, a third random) and
    written into every line ("input rbits code flags"), so a device and ``fmtsim ver`` use the same."""
    f = get_format(fmt)
    nan = None if f.has_nan or profile else "max"
    pol = resolve(fmt, rounding, overflow, nan, profile)
    if pol.on_nan.mode == "raise":  # the profile refuses NaN into this format: leave NaN inputs out
        with np.errstate(invalid="ignore"):
            x = x[~np.isnan(x.astype(np.float64))]
    if pol.rounding == "sr" and rbits is None:
        rbits = np.random.default_rng([rbits_seed or 0, x.size]).integers(0, 2**32, x.size, dtype=np.uint64)
        rbits = rbits.astype(np.uint32)
        rbits[: x.size // 3] = 0
        rbits[x.size - x.size // 3:] = 0xFFFFFFFF
    tag = f".{profile}" if profile else ""
    name = f"{src}_to_{f.name}.{pol.rounding}.{pol.on_overflow.mode}{tag}.{model}.tv"
    meta = {"operation": "encode", "source": SRC_NAME[src], "format": format_params(fmt),
            "rounding": pol.rounding, "overflow": pol.on_overflow.mode, "nan": pol.on_nan.mode, "profile": profile,
            "coverage_model": model, "cases": int(x.size),
            "line": "input code flags" if rbits is None else "input rbits code flags"}
    # under a profile, the profile itself (its flag conventions, per-source NaN codes ...) with the options
    # given beside it; the rounding, overflow and NaN mode it resolves to alone would drop those
    args = (rounding, overflow, nan) if profile else (pol.rounding, pol.on_overflow.mode, pol.on_nan.mode)
    return VectorFile(name, _encode_lines(x, src, fmt, *args, rbits, profile), meta)


def policy_files(src: str, fmt: str, rounding: str | None, overflow: str | None, profile: str | None,
                 level: int = 1, seed: int = 1) -> Iterator[VectorFile]:
    """The encode coverage models for one source type and format under any policy
    (``fmtsim gen f32_to_e4m3 --rounding rtz --profile ptx``)."""
    if src not in SRC:
        raise ValueError(f"unknown source {src!r}; choose from {', '.join(SRC)}")
    f = get_format(fmt)
    dt = SRC[src]
    kw: dict[str, Any] = {"profile": profile, "rbits_seed": seed}  # rbits_seed: random bits under sr
    yield _encode_file("encode_ties", boundary_points(fmt, dt), src, fmt, rounding, overflow, **kw)
    yield _encode_file("encode_range", _range_points(fmt, dt), src, fmt, rounding, overflow, **kw)
    rng = np.random.default_rng(seed)
    n = 4096 if level == 1 else 1 << 20
    low, _, top = float64_extent(f)
    lo, hi = np.log2(low) - 3, min(np.log2(top) + 2, 127.9)
    xr = (np.exp2(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)).astype(dt)
    yield _encode_file("encode_random", xr, src, fmt, rounding, overflow, **kw)
    if level >= 2 and dt.itemsize == 2:
        yield _encode_file("encode_all16", np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt), src,
                           fmt, rounding, overflow, **kw)


def _range_points(fmt: str, dt: np.dtype) -> np.ndarray:
    """+-0, tiny, subnormal edges, max, overflow ties, Inf, NaN payloads of both signs."""
    f = get_format(fmt)
    pos, normal, top = float64_extent(f)
    with np.errstate(over="ignore"):
        vals = [0.0, pos / 2, pos / 4, pos, pos * 2, top, top * 1.03125, top * 1.0625, top * 1.125, top * 2,
                normal, 1e-30, 1e30]
        a = np.array(vals, dtype=np.float64).astype(dt)
    a = a[np.isfinite(a.astype(np.float64))]
    u = UINT[dt.itemsize]
    specials = {2: [0x7C00, 0x7E00, 0x7D00, 0x7C01] if dt == np.float16 else [0x7F80, 0x7FC0, 0x7FA0, 0x7F81],
                4: [0x7F800000, 0x7FC00000, 0x7FA00000, 0x7F800001, 0x00000001, 0x007FFFFF],
                8: [0x7FF0000000000000, 0x7FF8000000000000, 0x7FF4000000000000, 1]}[dt.itemsize]
    sp = np.array(specials, dtype=np.uint64).astype(u)
    sign = np.array(1 << (8 * dt.itemsize - 1), dtype=np.uint64).astype(u)
    both = np.concatenate([a.view(u), sp, a.view(u) | sign, sp | sign])
    return both.view(dt)


def _double_rounding(fmt: str) -> np.ndarray:
    """float64 inputs one float32 ulp/2^20 off each midpoint: through float32 they land on it."""
    f = get_format(fmt)
    vals = np.unique(np.abs(f.values[np.isfinite(f.values)]))
    mids = (vals[:-1] + vals[1:]) / 2
    mids = mids[mids > 0]
    near = np.concatenate([mids * (1 + 2.0**-40), mids * (1 - 2.0**-40)])
    return np.concatenate([near, -near])


def _double_rounding_f32(fmt: str) -> np.ndarray:
    """float32 inputs one float32 ulp off each midpoint that float16 can hold: through
    float16 they would land on the midpoint and tie."""
    f = get_format(fmt)
    vals = np.unique(np.abs(f.values[np.isfinite(f.values)]))
    mids = ((vals[:-1] + vals[1:]) / 2).astype(np.float32)
    with np.errstate(over="ignore"):
        ok = (mids > 0) & (mids.astype(np.float16).astype(np.float32) == mids)
    mids = mids[ok]
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0))])
    return np.concatenate([near, -near])


SCALAR_FORMATS = ["e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e2m1", "e3m2", "e2m3", "e8m0", "ue4m3", "mxint8",
                  "e4m3ieee", "e3m4", "e4m3b11fnuz"]


def scalar_file_count(level: int = 1) -> int:
    """How many files :func:`scalar_files` yields at ``level``, without making them (a progress
    bar's total): per format a decode file, encode_ties in four sources and encode_range per
    overflow policy, one random, two double-rounding, four other modes and one sr file; level 2
    adds encode_all16 in two sources per policy and one random-bits file."""
    total = 0
    for fmt in SCALAR_FORMATS:
        f = get_format(fmt)
        policies = 2 if (f.has_nan or f.has_inf) else 1
        total += 9 + 5 * policies + ((2 * policies + 1) if level >= 2 else 0)
    return total


def scalar_files(level: int = 1, seed: int = 1) -> Iterator[VectorFile]:
    for fmt in SCALAR_FORMATS:
        f = get_format(fmt)
        yield VectorFile(
            f"{fmt}_to_f32.decode_all.tv",
            ("\n".join(f"{c:02X} {int(b):08X} 00" for c, b in
                       enumerate(decode(np.arange(f.n_codes), fmt, np.float32).view(np.uint32))) + "\n").encode(),
            {"operation": "decode", "format": format_params(fmt), "coverage_model": "decode_all",
             "cases": f.n_codes, "line": "code float32_bits flags"},
        )
        overflows = ["satfinite", "nonsat"] if (f.has_nan or f.has_inf) else ["satfinite"]
        rne = "rne"
        for src in ("f32", "f16", "bf16", "f64"):
            x = boundary_points(fmt, SRC[src])
            for ov in overflows:
                yield _encode_file("encode_ties", x, src, fmt, rne, ov)
        for ov in overflows:
            yield _encode_file("encode_range", _range_points(fmt, SRC["f32"]), "f32", fmt, rne, ov)
        n_random = 4096 if level == 1 else 1 << 20
        rng = np.random.default_rng(seed)
        low, _, top = float64_extent(f)
        lo, hi = np.log2(low) - 3, min(np.log2(top) + 2, 127.9)
        xr = (np.exp2(rng.uniform(lo, hi, n_random)) * rng.choice([-1.0, 1.0], n_random)).astype(np.float32)
        yield _encode_file("encode_random", xr, "f32", fmt, rne, "satfinite")
        yield _encode_file("double_rounding", _double_rounding(fmt), "f64", fmt, rne, "satfinite")
        yield _encode_file("double_rounding", _double_rounding_f32(fmt), "f32", fmt, rne, "satfinite")
        xm = boundary_points(fmt, SRC["f32"])
        for mode in ("rtz", "rup", "rdn", "rna"):
            yield _encode_file("modes", xm, "f32", fmt, mode, "satfinite")
        xs = xm[~np.isnan(xm.astype(np.float64))]
        xs = np.concatenate([xs, xs, xs])
        r = rng.integers(0, 2**32, xs.size, dtype=np.uint64).astype(np.uint32)
        r[: xs.size // 3] = 0
        r[-(xs.size // 3):] = 0xFFFFFFFF
        yield _encode_file("modes", xs, "f32", fmt, "sr", "satfinite", rbits=r)
        if level >= 2:
            for src in ("f16", "bf16"):
                x16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(SRC[src])
                for ov in overflows:
                    yield _encode_file("encode_all16", x16, src, fmt, rne, ov)
            xr2 = random_float32(1 << 20, seed)
            yield _encode_file("encode_random_bits", xr2, "f32", fmt, rne, "satfinite")


FMT2FMT = [("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e4m3", "e2m1"), ("e5m2", "e2m1"), ("e4m3", "e2m3"),
           ("e4m3", "e3m2"), ("e5m2", "e3m2"), ("e4m3", "e4m3fnuz"), ("e5m2", "e5m2fnuz"), ("e4m3fnuz", "e4m3"),
           ("e5m2fnuz", "e5m2"), ("e4m3", "e4m3ieee"), ("e4m3ieee", "e4m3"), ("e4m3", "e3m4"),
           ("e4m3fnuz", "e4m3b11fnuz")]


def fmt2fmt_files() -> Iterator[VectorFile]:
    """Every code of one format converted into another: the source value (exact in
    float32) rounded once. Lines: ``<source code> <code> <flags>``. These convert the
    *value*; re-encoding OCP bits as FNUZ with a doubled scale is fmtsim.fnuz."""
    for a, b in FMT2FMT:
        fa, fb = get_format(a), get_format(b)
        codes = np.arange(fa.n_codes)
        vals = decode(codes, a, np.float32)
        for ov in (["satfinite", "nonsat"] if (fb.has_nan or fb.has_inf) else ["satfinite"]):
            nan = None if fb.has_nan else "max"
            c, fl = encode_with_flags(vals, b, rounding="rne", overflow=ov, nan=nan)
            text = "".join(f"{int(s):02X} {int(d):02X} {int(g):02X}\n" for s, d, g in zip(codes, c, fl, strict=True))
            pol = resolve(b, "rne", ov, nan)
            yield VectorFile(
                f"{a}_to_{b}.rne.{ov}.fmt2fmt.tv", text.encode(),
                {"operation": "convert", "source_format": format_params(a), "format": format_params(b),
                 "rounding": "rne", "overflow": ov, "nan": pol.on_nan.mode, "coverage_model": "fmt2fmt",
                 "cases": int(fa.n_codes), "line": "source_code code flags"},
            )


def block_inputs(seed: int) -> np.ndarray:
    """(rows, 32) float32: specials of block_mx, then random rows."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((12, 32), np.float32)
    rows[1, 3] = 1e30  # one outlier
    rows[2, 0] = 4.0  # amax exactly 2^k
    rows[3, 0] = np.array([0x40FFFFFF], np.uint32).view(np.float32)[0]  # just below 8
    rows[4, :] = 1e-40  # float32 subnormals
    rows[5, 5] = np.nan
    rows[6, 7] = -np.inf
    rows[7, :4] = [5.0, 5.5, 6.5, 0.25]  # ties after scaling
    rows[8, :] = 3.4e38  # scale overflow under 'even'
    rows[9, :] = rng.standard_normal(32).astype(np.float32) * 1e-38  # scale underflow
    rows[10, :] = np.linspace(-7, 7, 32, dtype=np.float32)
    rows[11, :] = rng.standard_normal(32).astype(np.float32) * 1000
    rnd = (rng.standard_normal((52, 32)) * np.exp2(rng.integers(-30, 30, (52, 1)))).astype(np.float32)
    return np.concatenate([rows, rnd])


def _binary(arrays: list[tuple[str, np.ndarray]]) -> tuple[bytes, list[dict[str, Any]]]:
    out = b""
    layout = []
    for name, a in arrays:
        a = np.ascontiguousarray(a)
        layout.append({"name": name, "dtype": a.dtype.str.lstrip("<|="), "shape": list(a.shape),
                       "offset": len(out), "nbytes": a.nbytes})
        out += a.tobytes()
    return out, layout


def block_files(seed: int = 2) -> Iterator[VectorFile]:
    from .. import mx, nvfp4

    x = block_inputs(seed)
    for scheme in ("mxfp4", "mxfp8_e4m3"):
        for rule in mx.SCALE_RULES:
            q = mx.quantize(x, scheme, scale_rule=rule)
            deq = mx.dequantize(q, np.float32)
            codes = pack_fp4(q.codes) if scheme == "mxfp4" else q.codes
            data, layout = _binary([("input", x), ("codes", codes), ("scales", q.scales), ("dequantized", deq)])
            yield VectorFile(
                f"{scheme}.{rule}.rne.block_mx.bin", data,
                {"operation": "mx_quantize", "scheme": scheme, "format": format_params(mx.SCHEMES[scheme]),
                 "scale_format": format_params("e8m0"), "scale_rule": rule, "rounding": "rne",
                 "block_size": 32, "axis": -1, "packing": "fp4 two per byte, element 2i in the low nibble"
                 if scheme == "mxfp4" else "one code per byte", "scale_layout": "row-major [rows, K/32]",
                 "coverage_model": "block_mx", "cases": int(x.shape[0]), "arrays": layout},
            )
    # a padded tail: 40 values per row, padded with zeros to 64 (two blocks)
    xp = x[:, :40].copy()
    q = mx.quantize(xp, "mxfp4", pad=True)
    data, layout = _binary([("input", xp), ("codes", pack_fp4(q.codes)), ("scales", q.scales),
                            ("dequantized", mx.dequantize(q, np.float32))])
    yield VectorFile(
        "mxfp4.floor.rne.padded.block_mx.bin", data,
        {"operation": "mx_quantize", "scheme": "mxfp4", "format": format_params("e2m1"),
         "scale_format": format_params("e8m0"), "scale_rule": "floor", "rounding": "rne", "block_size": 32,
         "axis": -1, "padding": "each row of 40 values padded with zeros to 64; codes cover 64, dequantized 40",
         "packing": "fp4 two per byte, element 2i in the low nibble", "scale_layout": "row-major [rows, 2]",
         "coverage_model": "block_mx", "cases": int(xp.shape[0]), "arrays": layout},
    )
    finite = x[:64].copy()
    finite[~np.isfinite(finite)] = 0.0  # NVFP4 refuses NaN/Inf
    shapes = (((1, 16), "1x16", finite), ((16, 16), "16x16", finite),
              ((1, 16), "1x16.amax0", np.zeros((16, 32), np.float32)))
    cases = [(r, t, name, xs) for r in nvfp4.RECIPES for t, name, xs in shapes]
    for recipe, tile, tag, xs in cases:
        qn = nvfp4.quantize(xs, recipe=recipe, tile=tile)
        with np.errstate(invalid="ignore"):
            deq = nvfp4.dequantize(qn, np.float32)
        gs = np.array([qn.global_scale], np.float32)
        data, layout = _binary([("input", xs), ("codes", pack_fp4(qn.codes)), ("scales", qn.scales),
                                ("global_scale", gs), ("dequantized", deq)])
        yield VectorFile(
            f"nvfp4.{recipe}.{tag}.block_nvfp4.bin", data,
            {"operation": "nvfp4_quantize", "recipe": recipe, "format": format_params("e2m1"),
             "scale_format": format_params("ue4m3"), "global_scale": "float32 decode multiplier",
             "tile": list(tile), "block_size": 16, "axis": -1,
             "packing": "fp4 two per byte, element 2i in the low nibble",
             "scale_layout": "row-major [rows, K/16]" + ("; a 16x16 tile's scale repeated on its 16 rows"
                                                          if tile[0] == 16 else ""),
             "coverage_model": "block_nvfp4", "cases": int(xs.shape[0]), "arrays": layout},
        )


def layout_files(seed: int = 3) -> Iterator[VectorFile]:
    """Memory layouts: FP4 nibble orders, FP6 dense packing, the 128x4 scale swizzle."""
    from ..layout import pack_fp6, swizzle_scales

    rng = np.random.default_rng(seed)
    c4 = np.concatenate([np.arange(16, dtype=np.uint8).repeat(16), np.tile(np.arange(16, dtype=np.uint8), 16),
                         rng.integers(0, 16, 512, dtype=np.uint8)])
    for order in ("low_first", "high_first"):
        data, arrays = _binary([("codes", c4), ("packed", pack_fp4(c4, order=order))])
        yield VectorFile(f"fp4_pack.{order}.layout.bin", data,
                         {"operation": "pack_fp4", "order": order, "coverage_model": "layout",
                          "cases": int(c4.size), "arrays": arrays})
    c6 = np.concatenate([np.arange(64, dtype=np.uint8), rng.integers(0, 64, 448, dtype=np.uint8)])
    data, arrays = _binary([("codes", c6), ("packed", pack_fp6(c6))])
    yield VectorFile("fp6_pack.dense.layout.bin", data,
                     {"operation": "pack_fp6", "order": "w = c0 | c1<<6 | c2<<12 | c3<<18, bytes LSB first",
                      "coverage_model": "layout", "cases": int(c6.size), "arrays": arrays})
    s = ((np.arange(130 * 5) * 7 + 1) % 255 + 1).astype(np.uint8).reshape(130, 5)
    data, arrays = _binary([("scales", s), ("swizzled", swizzle_scales(s))])
    yield VectorFile("scale_swizzle.128x4.layout.bin", data,
                     {"operation": "swizzle_scales", "rows": 130, "cols": 5, "padded": [256, 8],
                      "rule": "tile = (r // 128) * ceil(cols/4) + c // 4; byte = tile*512 + (r%32)*16 + "
                              "((r%128)//32)*4 + c%4; padding zero",
                      "coverage_model": "layout", "cases": int(s.size), "arrays": arrays})


def _exact_dot(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A (M, K) and B (N, K) exact float64 values -> (C rounded once to float32, 1 where
    the exact C is a float32, the bound K * 2^-24 * sum |a_k b_k|, which the vectors do not carry)."""
    from fractions import Fraction

    m, n = a.shape[0], b.shape[0]
    c = np.empty((m, n), np.float32)
    exact = np.empty((m, n), np.uint8)
    bound = np.empty((m, n), np.float32)
    fa = [[Fraction(float(v)) for v in row] for row in a]
    fb = [[Fraction(float(v)) for v in row] for row in b]
    for i in range(m):
        for j in range(n):
            if np.isnan(a[i]).any() or np.isnan(b[j]).any():
                c[i, j], exact[i, j], bound[i, j] = np.nan, 1, 0
                continue
            s = sum((x * y for x, y in zip(fa[i], fb[j], strict=True)), Fraction(0))
            # round the exact sum once to float32: the nearest of three neighbours, ties to even
            r = np.float32(float(s))
            cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
            pick = min(cands, key=lambda v: (abs(Fraction(float(v)) - s), int(np.array(v).view(np.uint32)) & 1))
            c[i, j] = pick
            exact[i, j] = int(Fraction(float(pick)) == s)
            mag = sum((abs(x * y) for x, y in zip(fa[i], fb[j], strict=True)), Fraction(0))
            bound[i, j] = np.float32(float(mag) * a.shape[1] * 2.0**-24)
    return c, exact, bound


FAMILY_TOLERANCE = ("|device - c| <= c_bound: the model-family bound of any matrix unit with F >= 13 fraction "
                    "bits kept and L >= 8 products per step (vectors/README.md); c_exact == 1 marks an exact sum "
                    "that is a float32")


def _family_bound32(bound: np.ndarray) -> np.ndarray:
    """A float64 upper bound as float32, rounded up."""
    with np.errstate(over="ignore"):
        b32 = bound.astype(np.float32)
    return np.where(b32.astype(np.float64) < bound, np.nextafter(b32, np.float32(np.inf)), b32).astype(np.float32)


def dot_files(seed: int = 4) -> Iterator[VectorFile]:
    """Block-scaled GEMMs C = A B^T with A (8, 64) and B (8, 64) quantized along K, against
    the exact product of the dequantized operands."""
    from .. import mx, nvfp4

    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-4, 4, (8, 1)))).astype(np.float32)
    b = (rng.standard_normal((8, 64)) * np.exp2(rng.integers(-4, 4, (8, 1)))).astype(np.float32)
    a[0, :32] = 0  # an all-zero block
    b[1, 5] = 1000.0  # an outlier
    for scheme in ("mxfp8_e4m3", "mxfp4"):
        qa, qb = mx.quantize(a, scheme), mx.quantize(b, scheme)
        da, db = mx.dequantize(qa, np.float64), mx.dequantize(qb, np.float64)
        c, exact, _ = _exact_dot(da, db)
        elem = mx.SCHEMES[scheme]
        bound = _family_bound32(family_bound(qa.codes, qb.codes.T, None, elem, elem, qa.scales, qb.scales.T,
                                             "e8m0", 32))
        pack = pack_fp4 if scheme == "mxfp4" else (lambda v: v)
        data, arrays = _binary([("a_input", a), ("b_input", b), ("a_codes", pack(qa.codes)), ("a_scales", qa.scales),
                                ("b_codes", pack(qb.codes)), ("b_scales", qb.scales), ("c", c),
                                ("c_exact", exact), ("c_bound", bound)])
        yield VectorFile(f"{scheme}.floor.rne.dot.bin", data, {
            "operation": "block_scaled_gemm", "scheme": scheme, "format": format_params(mx.SCHEMES[scheme]),
            "scale_format": format_params("e8m0"), "block_size": 32, "M": 8, "N": 8, "K": 64,
            "c": "C = A_deq @ B_deq^T, exact sum rounded once to float32 (RNE)",
            "tolerance": FAMILY_TOLERANCE,
            "coverage_model": "dot", "cases": 64, "arrays": arrays})
    na, nb = nvfp4.quantize(a), nvfp4.quantize(b)
    da, db = nvfp4.dequantize(na, np.float64), nvfp4.dequantize(nb, np.float64)
    c, exact, _ = _exact_dot(da, db)
    # the global scales are a kernel's epilogue: alpha = fl32(g_a g_b) times the accumulator, rounded once more
    alpha = float(np.float32(float(na.global_scale) * float(nb.global_scale)))
    bound = _family_bound32(alpha * (1 + 2.0**-10) * family_bound(na.codes, nb.codes.T, None, "e2m1", "e2m1",
                                                                    na.scales, nb.scales.T, "ue4m3", 16))
    data, arrays = _binary([("a_input", a), ("b_input", b), ("a_codes", pack_fp4(na.codes)), ("a_scales", na.scales),
                            ("a_global_scale", np.array([na.global_scale], np.float32)),
                            ("b_codes", pack_fp4(nb.codes)), ("b_scales", nb.scales),
                            ("b_global_scale", np.array([nb.global_scale], np.float32)), ("c", c),
                            ("c_exact", exact), ("c_bound", bound)])
    yield VectorFile("nvfp4.te.dot.bin", data, {
        "operation": "block_scaled_gemm", "scheme": "nvfp4", "recipe": "te", "format": format_params("e2m1"),
        "scale_format": format_params("ue4m3"), "block_size": 16, "M": 8, "N": 8, "K": 64,
        "c": "C = A_deq @ B_deq^T (global scales included), exact sum rounded once to float32 (RNE)",
        "tolerance": FAMILY_TOLERANCE,
        "coverage_model": "dot", "cases": 64, "arrays": arrays})


def level1_files() -> list[VectorFile]:
    from .gemm_vectors import gemm_files

    return (list(scalar_files(1)) + list(fmt2fmt_files()) + list(block_files()) + list(layout_files())
            + list(dot_files()) + list(gemm_files()))


def manifest_text(files: list[VectorFile], level: int, kept: dict[str, Any] | None = None) -> bytes:
    """manifest.json for ``files``, plus ``kept``: entries of an earlier run's manifest whose
    files stay beside them (see :func:`earlier_entries`)."""
    manifest: dict[str, Any] = {"fmtsim_version": __version__, "level": level, "files": dict(kept or {})}
    for vf in files:
        manifest["files"][vf.name] = dict(vf.meta, sha256=hashlib.sha256(vf.text).hexdigest(), bytes=len(vf.text))
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()


def earlier_entries(out: Path, files: list[VectorFile]) -> tuple[dict[str, Any], int]:
    """(entries, level) of the manifest.json an earlier ``fmtsim gen -o`` left in ``out``, for the
    files this run does not rewrite and that are still there, so that two runs into one directory
    add up. ({}, 0) when there is none. ValueError when there is one that cannot be merged: not
    a manifest, or written by another fmtsim version (its vectors may differ from this one's)."""
    path = out / "manifest.json"
    if not os.path.lexists(path):
        return {}, 0
    check_replaceable(path, what="vector file")  # never open a FIFO or follow a link to read it
    try:
        old = load_manifest(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{e}; it cannot be merged with this run's files: remove it, or write into another "
                         "directory") from None
    if old.get("fmtsim_version") != __version__:
        raise ValueError(f"{path}: written by fmtsim {old.get('fmtsim_version')!r}, this is {__version__}; vectors of "
                         "two versions are not merged into one manifest: write into another directory, or remove "
                         "the old files and manifest.json")
    ours = {vf.name for vf in files}
    kept = {name: entry for name, entry in old["files"].items() if name not in ours and (out / name).is_file()}
    level = old.get("level")
    return kept, level if type(level) is int else 0


def check_output_dir(out: Path) -> None:
    """Create ``out`` if missing; ValueError names it when it is a file, lies under a file, or
    cannot be created or written (tried with a real write: permission bits do not bind root)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is not a directory; -o names the directory to write vectors into")
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(out / ".fmtsim-write-test", b"")
        (out / ".fmtsim-write-test").unlink()
    except OSError as e:
        raise ValueError(f"{out}: cannot write vectors there ({e.strerror or e})") from None


def write_vectors(files: list[VectorFile], out: Path, level: int, merge: bool = True) -> dict[str, Any]:
    """Write files and manifest.json (each via a temporary name, then renamed) into ``out``
    (checked first: :func:`check_output_dir`). An earlier run's manifest there is merged: its
    entries for files this run leaves alone are kept (:func:`earlier_entries`), so ``fmtsim gen``
    run twice into one directory lists every file of both runs. ``merge=False``: the manifest
    lists this run's files only (the package's own vectors, regenerated whole)."""
    check_output_dir(out)
    kept, old_level = earlier_entries(out, files) if merge else ({}, 0)
    text = manifest_text(files, max(level, old_level), kept)
    for name in [*(vf.name for vf in files), "manifest.json"]:  # all refused before any is written
        check_replaceable(out / name, what="vector file")
    for name, data in [*((vf.name, vf.text) for vf in files), ("manifest.json", text)]:
        try:
            atomic_write(out / name, data)
        except OSError as e:  # a full disk or a quota: say which file, and that none is half-written
            raise ValueError(f"{out / name}: cannot write it ({e.strerror or e}); nothing was left under that "
                             "name (manifest.json is written last)") from None
    return dict(json.loads(text), kept=len(kept))


_HEX = frozenset("0123456789abcdefABCDEF")


def read_tv(text: str, what: str) -> list[list[str]]:
    """Split a .tv text into fields; malformed lines raise ValueError with the line number.

    As devices write them: ``\n`` or ``\r\n`` line ends, spaces or tabs between fields,
    trailing blanks, a UTF-8 byte order mark, hex digits in either case. Blank lines
    and lines starting with ``#`` are skipped. Fields are hex digits only (no ``0x``)."""
    rows = []
    if text.startswith("\ufeff"):
        text = text[1:]
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if not all(p and _HEX.issuperset(p) for p in parts):
            raise ValueError(f"{what}: line {n}: not hex fields: {line[:80]!r}")
        rows.append(parts)
    return rows


@dataclass
class VerifyResult:
    cases: int = 0
    failed: int = 0
    messages: list[str] = field(default_factory=list)
    note: str = ""
    # every failure with the rules that explain it (fmtsim.conformance.classify), up to its limit
    rules: Any = None
    explained_by: list[str] = field(default_factory=list)  # fmtsim options that give every line's code

    def summary(self) -> list[str]:
        """The failures by rule, most frequent first, each with its first example."""
        if self.rules is None:
            return []
        lines = [f"{rule}: {n} ({example})" for rule, n, example in self.rules.summary()]
        if self.rules.unclassified:
            lines.append(f"not classified: {self.rules.unclassified} (past the first {self.rules.limit} failures)")
        return lines


def _classifier(meta: dict[str, Any], fmt: str) -> Callable[[list[str], int], Any] | None:
    """``classify(expected_row, got_code) -> Mismatch`` for an encode or convert file's lines, under
    the policy its manifest entry records; None for an entry whose policy cannot be rebuilt."""
    from .classify import explain_encode

    try:
        profile = meta.get("profile")
        pol = resolve(fmt, meta.get("rounding"), meta.get("overflow"), None if profile else meta.get("nan"),
                      profile)
    except (ValueError, TypeError):
        return None
    source = meta.get("source")
    if meta.get("operation") == "encode" and source in _TAG_OF_SOURCE:
        tag, src = _TAG_OF_SOURCE[source], source
    else:
        sf = meta.get("source_format")
        try:
            tag, src = get_format(str(sf.get("name") if isinstance(sf, dict) else None)).name, "float32"
        except ValueError:
            return None
    p = pol.for_source(src)
    f = get_format(fmt)
    n_ops = 2 if "rbits" in str(meta.get("line", "")) else 1

    def classify(e: list[str], got: int) -> Any:
        bits = BitPattern(tag, int(e[0], 16))
        if tag not in SOURCE_TAGS and bits.bits >= get_format(tag).n_codes:
            return None
        with np.errstate(invalid="ignore"):
            value = bits.value()
        return explain_encode(value, src, f, p, int(e[n_ops], 16), got, rbits=int(e[1], 16) if n_ops == 2 else 0)
    return classify


def _describe(fmt: str, code: int) -> str:
    f = get_format(fmt)
    w = code_digits(f)
    if code >= f.n_codes:
        return f"0x{code:0{w}x} (not a code of {f.name})"
    if f.kind == "int":
        return f"code 0x{code:02X} ({f.code_value(code)})"
    s, e, m = f.code_fields(code)
    v = f.code_value(code)
    shown = v if isinstance(v, float) else float(v) if f.fits_float64 else power_text(v)
    return f"0x{code:0{w}X} (sign {s}, exp {e}, man {m}, {shown})"


_TAG_OF_SOURCE = {name: tag for tag, (_, name) in SOURCE_TAGS.items()}


def input_pattern(meta: dict[str, Any], field: str) -> str:
    """A .tv file's input field as the bit pattern ``fmtsim encode`` reads back (fmtsim.bitpatterns),
    with its value: 'f32:0x3a800000 (0.0009765625)', 'e5m2:0x3c (1)' for a conversion's source code."""
    bits = int(field, 16)
    source = meta.get("source")
    if isinstance(source, str) and source in _TAG_OF_SOURCE:
        p = BitPattern(_TAG_OF_SOURCE[source], bits)
    else:
        sf = meta.get("source_format")
        name = sf.get("name") if isinstance(sf, dict) else None
        try:
            p = BitPattern(get_format(str(name)).name, bits)
            if bits >= get_format(p.tag).n_codes:
                return field
        except ValueError:
            return field  # an entry that does not say the input's type: the field as written
    return f"{p} ({short_value(p.as_array())})"


def _f32_text(bits: int) -> str:
    if bits >> 32:
        return f"{bits:#x} (not a float32 pattern)"
    p = BitPattern("f32", bits)
    return f"{p} ({short_value(p.as_array())})"


def _flags_field(text: str | None) -> str:
    if text is None:
        return "missing"
    return flags_text(int(text, 16))


def _meta_fields(meta: Any, what: str) -> tuple[str, str, int]:
    """(format name, operation, operand count) from a manifest entry, or ValueError."""
    try:
        fmt = meta["format"]["name"]
        op = meta["operation"]
        line = meta.get("line", "")
        get_format(fmt)
    except (KeyError, TypeError, AttributeError, ValueError):
        raise ValueError(f"{what} lacks a valid 'format' name or 'operation'") from None
    return fmt, op, 2 if "rbits" in str(line) else 1


def _compare(exp_rows: list[list[str]], got_rows: list[list[str]], meta: dict[str, Any], *, check_flags: bool,
             check_nans: bool, max_errors: int, what: str, where: str = "line") -> VerifyResult:
    fmt, op, n_ops = _meta_fields(meta, "the vector file's manifest.json entry")
    res = VerifyResult()
    if len(got_rows) != len(exp_rows):
        unit = "result lines" if where == "line" else "results"
        raise ValueError(f"{what}: {len(got_rows)} {unit} for {len(exp_rows)} cases")
    f = get_format(fmt)
    encode_op = op in ("encode", "convert")
    classify = _classifier(meta, fmt) if encode_op else None
    if encode_op or op == "decode":
        from .classify import Mismatch, RuleTally, explain_decode

        res.rules = RuleTally()
    tags: list[tuple[int, int]] = []  # (message, tally item): each line's rule, known once every line is in
    for n, (e, g) in enumerate(zip(exp_rows, got_rows, strict=True), 1):
        if len(g) != len(e) and not (not check_flags and len(g) == len(e) - 1):
            hint = "" if check_flags else f" or {len(e) - 1} (no flags)"
            fields = meta.get("line", "")
            flagless = check_flags and len(g) == len(e) - 1
            raise ValueError(f"{what}: {where} {n}: {len(g)} fields, expected {len(e)}{hint}"
                             + (f" ({fields})" if fields else "")
                             + ("; for a device that reports no flags, pass --ignore-flags (check_flags=False "
                                "in Python): the flags field may then be left out" if flagless else ""))
        if [int(v, 16) for v in g[:n_ops]] != [int(v, 16) for v in e[:n_ops]]:
            raise ValueError(f"{what}: {where} {n}: operands {' '.join(g[:n_ops])} do not match case "
                             f"{' '.join(e[:n_ops])} (results must be in the vector file's order)")
        res.cases += 1
        ec, gc = int(e[n_ops], 16), int(g[n_ops], 16)
        ok = ec == gc
        if not ok and encode_op and not check_nans and ec in f.nan_codes and gc in f.nan_codes:
            ok = True  # any NaN of the target format
        got_flags = g[n_ops + 1] if len(g) > n_ops + 1 else None
        if ok and check_flags and (got_flags is None or int(e[-1], 16) != int(got_flags, 16)):
            ok = False
        if not ok:
            res.failed += 1
            item = None
            if encode_op:
                given = input_pattern(meta, e[0]) + (f" rbits 0x{int(e[1], 16):08X}" if n_ops == 2 else "")
                candidates = None
                if ec == gc:  # the code is right: the flags are wrong
                    candidates = [Mismatch("flags", f"flags {_flags_field(e[-1])} expected, the device gave "
                                                    f"{_flags_field(got_flags)}")]
                elif classify is not None and len(res.rules.items) < res.rules.limit:
                    candidates = classify(e, gc)
                if candidates is not None:
                    item = res.rules.add(f"{where} {n}: input {given}", candidates)
                elif classify is not None:
                    res.rules.unclassified += 1
            elif res.rules is not None and len(res.rules.items) < res.rules.limit:
                code = int(e[0], 16)
                if code < f.n_codes and int(g[1], 16) < 1 << 32:
                    item = res.rules.add(f"{where} {n}: code 0x{code:0{code_digits(f)}X}",
                                         explain_decode(f, code, int(e[1], 16), int(g[1], 16)))
            if len(res.messages) < max_errors:
                if item is not None:
                    tags.append((len(res.messages), item))
                if encode_op:
                    got_text = _describe(fmt, gc)
                    if check_flags:
                        res.messages.append(f"{where} {n}: input {given}: expected {_describe(fmt, ec)} flags "
                                            f"{_flags_field(e[-1])}, got {got_text} flags {_flags_field(got_flags)}")
                    else:
                        res.messages.append(f"{where} {n}: input {given}: expected {_describe(fmt, ec)}, "
                                            f"got {got_text}")
                else:
                    res.messages.append(f"{where} {n}: code 0x{int(e[0], 16):0{code_digits(f)}X}: expected "
                                        f"{_f32_text(int(e[1], 16))}, got {_f32_text(int(g[1], 16))}")
    if tags:
        chosen = res.rules.chosen()
        for m, item in tags:
            res.messages[m] += f" [{chosen[item].rule}]"
    if encode_op and n_ops == 1 and res.failed and len(exp_rows) <= SUGGEST_LIMIT:
        codes_seen = [int(g[n_ops], 16) for g in got_rows]
        if not check_flags or all(int(e[-1], 16) == int(g[-1], 16) for e, g in zip(exp_rows, got_rows, strict=True)):
            res.explained_by = explaining_policies(meta, [e[0] for e in exp_rows], codes_seen, check_nans)
    return res


SUGGEST_LIMIT = 1 << 20  # inputs re-encoded under each profile and option to find one that explains a file


def explaining_policies(meta: dict[str, Any], inputs: list[str], codes: list[int], check_nans: bool = False
                        ) -> list[str]:
    """The fmtsim options under which every line's code is ``codes`` (any NaN for a NaN unless
    ``check_nans``): each profile, and each rounding mode with each overflow policy, as
    ``fmtsim encode`` spells them ('--profile ml_dtypes', '--rounding rtz --overflow satfinite');
    empty when none does, or for an entry that does not say its inputs' type."""
    from ..policy import OVERFLOW_MODES, PROFILES, ROUNDING_MODES

    fmt = meta["format"]["name"]
    f = get_format(fmt)
    bits = np.array([int(t, 16) for t in inputs], dtype=np.uint64)
    source = meta.get("source")
    if meta.get("operation") == "encode" and source in _TAG_OF_SOURCE:
        dt = SOURCE_TAGS[_TAG_OF_SOURCE[source]][0]
        x = bits.astype(UINT[dt.itemsize]).view(dt)
    else:
        sf = meta.get("source_format")
        try:
            src_fmt = get_format(str(sf.get("name") if isinstance(sf, dict) else None))
        except ValueError:
            return []
        if (bits >= src_fmt.n_codes).any():
            return []
        x = decode(bits.astype(np.int64), src_fmt, np.float32)
    seen = np.array(codes, dtype=np.int64)
    own = (meta.get("rounding"), meta.get("overflow"), meta.get("profile"))
    options: list[tuple[str, dict[str, Any]]] = [(f"--profile {p}", {"profile": p}) for p in PROFILES
                                                 if p != own[2]]
    nan = meta.get("nan") if not own[2] else None
    options += [(f"--rounding {r} --overflow {o}", {"rounding": r, "overflow": o, "nan": nan})
                for r in ROUNDING_MODES if r != "sr" for o in OVERFLOW_MODES
                if (r, o, None) != own and (o != "satsym" or (f.kind == "int" and f.signed))]
    found = []
    for label, kw in options:
        try:
            with np.errstate(all="ignore"):
                got = np.asarray(encode(x, fmt, **kw), dtype=np.int64).reshape(-1)
        except (ValueError, TypeError):
            continue  # a policy that refuses some input (NaN into FP4) or this format
        same = got == seen
        if not check_nans:
            same |= np.isin(got, f.nan_codes) & np.isin(seen, f.nan_codes)
        if same.all():
            found.append(label)
    return found


def verify_lines(expected: str, actual: str, meta: dict[str, Any], *, check_flags: bool = True,
                 check_nans: bool = False, max_errors: int = 20, what: str = "results") -> VerifyResult:
    """Compare a device's result lines (the vector file's line format; without the flags
    field when ``check_flags`` is False) against the expected file."""
    return _compare(read_tv(expected, "expected"), read_tv(actual, what), meta, check_flags=check_flags,
                    check_nans=check_nans, max_errors=max_errors, what=what)


NPY_MAGIC = b"\x93NUMPY"
RAW_SUFFIXES = (".bin", ".raw", ".u8", ".u32")


def result_kind(data: bytes, cases: int, result_bytes: int, name: str = "") -> str:
    """How a device's results for a .tv file are written: 'npy' (a NumPy .npy file, by its
    magic bytes), 'raw' (exactly ``cases * result_bytes`` bytes, or a name ending in
    .bin/.raw/.u8/.u32) or 'text' (lines). A text file of N cases has at least 4N bytes,
    so a file of exactly N or 2N bytes (one uint8 or uint16 code per case) cannot be text; a file of exactly 4N
    bytes (decode results) is text only if it reads as N text lines."""
    if data.startswith(NPY_MAGIC):
        return "npy"
    if name.lower().endswith(RAW_SUFFIXES):
        return "raw"
    if cases and len(data) == cases * result_bytes:
        if result_bytes <= 2:  # one or two bytes per case (uint8 or uint16 codes): too short for text
            return "raw"
        try:  # 4 bytes per case could in principle be N text lines of 4 bytes each ("0 0\n")
            if len(read_tv(data.decode("utf-8"), "results")) == cases:
                return "text"
        except (UnicodeDecodeError, ValueError):
            pass
        return "raw"
    return "text"


def _text_of(data: bytes, what: str, cases: int, result_bytes: int) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{what}: neither text result lines (byte {data[e.start]:#04x} at offset {e.start} is not UTF-8) nor a "
            f"raw array of {result_bytes} byte(s) per case ({len(data)} bytes; the vector file has {cases} cases, "
            f"so {cases * result_bytes}) nor a .npy file"
        ) from None
    if "\x00" in text:
        i = text.index("\x00")
        raise ValueError(f"{what}: a NUL byte at offset {i}: neither text result lines nor a raw array of "
                         f"{result_bytes} byte(s) per case ({len(data)} bytes for {cases} cases)")
    return text


def _array_results(data: bytes, kind: str, cases: int, decode_op: bool, what: str, code_bytes: int = 1) -> np.ndarray:
    """The device's results as a flat uint64 array (codes, or float32 bits for decode files)."""
    if kind == "npy":
        import io

        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception as e:  # numpy raises ValueError, EOFError, ... for broken files
            raise ValueError(f"{what}: not a readable .npy file ({type(e).__name__}: {e})") from None
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"{what}: a .npy file holding one array is expected")
        if decode_op and arr.dtype == np.float32:
            arr = arr.view(np.uint32)
        if arr.dtype.kind not in "iu":
            want = "float32 values or their uint32 bits" if decode_op else \
                f"integer codes (uint{8 * code_bytes})"
            raise ValueError(f"{what}: a .npy array of {arr.dtype}; expected {want}")
        flat = arr.reshape(-1)
        if flat.size != cases:
            raise ValueError(f"{what}: a .npy array of shape {arr.shape} ({flat.size} values) for {cases} cases")
    else:
        width = 4 if decode_op else code_bytes
        if len(data) != cases * width:
            raise ValueError(f"{what}: a raw array of {len(data)} bytes for {cases} cases; expected "
                             f"{cases * width} ({width} byte(s) per case, in the vector file's order)")
        flat = np.frombuffer(data, "<u4" if decode_op else f"<u{code_bytes}")
    top = (1 << 32) - 1 if decode_op else (1 << (8 * code_bytes)) - 1
    bad = (flat < 0) | (flat > top)
    if bad.any():
        i = int(np.argmax(bad))
        kind_name = "float32 bit pattern" if decode_op else "code"
        raise ValueError(f"{what}: value {flat[i]} at index {i} is not a {kind_name}")
    return flat.astype(np.uint64)


def verify_results(expected: str, actual: bytes, meta: dict[str, Any], *, check_flags: bool = True,
                   check_nans: bool = False, max_errors: int = 20, what: str = "results") -> VerifyResult:
    """A device's results for a .tv vector file, in any of the forms :func:`result_kind`
    tells apart: text lines (as :func:`verify_lines`), or a raw array of results in
    operand order (encode/convert: one code per case, one byte each or any integer
    .npy; decode: float32 bits, four little-endian bytes each or a float32/uint32 .npy).
    Arrays carry no flags, so flags are not compared for them (the result's ``note``
    says so). Failures read exactly as for text, numbered by case ("case N")."""
    _, op, n_ops = _meta_fields(meta, "the vector file's manifest.json entry")
    exp_rows = read_tv(expected, "expected")
    decode_op = op == "decode"
    code_bytes = _code_bytes(meta)
    width = 4 if decode_op else code_bytes
    kind = result_kind(actual, len(exp_rows), width, what)
    if kind == "text":
        return verify_lines(expected, _text_of(actual, what, len(exp_rows), width), meta, check_flags=check_flags,
                            check_nans=check_nans, max_errors=max_errors, what=what)
    flat = _array_results(actual, kind, len(exp_rows), decode_op, what, code_bytes)
    digits = 8 if decode_op else 2 * code_bytes
    got_rows = [e[:n_ops] + [format(int(v), f"0{digits}X")] for e, v in zip(exp_rows, flat.tolist(), strict=True)]
    res = _compare(exp_rows, got_rows, meta, check_flags=False, check_nans=check_nans, max_errors=max_errors,
                   what=what, where="case")
    res.note = f"{'a .npy' if kind == 'npy' else 'a raw'} array of results: flags not compared (arrays carry none)"
    return res


def _code_bytes(meta: dict[str, Any]) -> int:
    """Bytes per code in a raw result array: 2 for a format wider than a byte (its manifest's bits)."""
    fmt = meta.get("format")
    bits = fmt.get("bits") if isinstance(fmt, dict) else None
    return 2 if isinstance(bits, int) and bits > 8 else 1


def load_manifest(path: Path) -> dict[str, Any]:
    """manifest.json of a vectors directory; ValueError/OSError naming the file when it
    is missing, not UTF-8 JSON, or not shaped as fmtsim writes it."""
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a manifest (byte {e.object[e.start]:#04x} at offset {e.start} is not UTF-8)") \
            from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in files.items()):
        raise ValueError(f"{path}: not a vectors manifest (no 'files' object of file name -> entry)")
    for name, entry in files.items():
        if name.endswith(".bin"):
            arrays = entry.get("arrays")
            op = entry.get("operation")
            ok = isinstance(op, str) and op in OUTPUT_ARRAYS and isinstance(arrays, list) and all(
                isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("dtype"), str)
                and isinstance(a.get("shape"), list) and isinstance(a.get("offset"), int)
                and isinstance(a.get("nbytes"), int) for a in arrays)
            if ok:
                names = {a["name"] for a in arrays}
                need = set(OUTPUT_ARRAYS[entry["operation"]])
                if entry["operation"] == "block_scaled_gemm":
                    need |= {"c_exact", "c_bound"}
                ok = need <= names
                try:
                    for a in arrays:
                        np.dtype(a["dtype"])
                except Exception:  # np.dtype(",") raises SyntaxError
                    ok = False
            if not ok:
                raise ValueError(f"{path}: entry {name!r} lacks a known 'operation' or a valid 'arrays' layout")
        elif name.endswith(".tv"):
            _meta_fields(entry, f"{path}: entry {name!r}")
    return dict(data)


def check_sha256(data: bytes, meta: dict[str, Any], path: Any) -> None:
    """ValueError naming ``path`` when the vector file's bytes do not hash to the sha256 its manifest
    entry records: a vector file changed after it was written, whose verdicts would blame the device."""
    want = meta.get("sha256")
    if want is None:  # every manifest fmtsim writes records one: an entry without it was edited
        raise ValueError(f"{path}: its manifest.json entry records no sha256, so the file cannot be checked "
                         "(restore manifest.json, or regenerate the directory with 'fmtsim gen -o DIR')")
    if not isinstance(want, str) or len(want) != 64:
        raise ValueError(f"{path}: its manifest.json entry's sha256 is not a 64-digit hex string: {want!r}")
    got = hashlib.sha256(data).hexdigest()
    if got != want.lower():
        raise ValueError(f"{path}: the vector file is corrupt: its sha256 is {got[:16]}..., manifest.json records "
                         f"{want[:16]}... (restore it, or regenerate the directory with 'fmtsim gen -o DIR')")


OUTPUT_ARRAYS = {
    "mx_quantize": ("codes", "scales", "dequantized"),
    "nvfp4_quantize": ("codes", "scales", "global_scale", "dequantized"),
    "pack_fp4": ("packed",),
    "pack_fp6": ("packed",),
    "swizzle_scales": ("swizzled",),
    "block_scaled_gemm": ("c",),
    "unit_gemm": ("d",),
}


def _unpack_arrays(data: bytes, meta: dict[str, Any], what: str) -> dict[str, np.ndarray]:
    need = sum(a["nbytes"] for a in meta["arrays"])
    if len(data) != need:
        raise ValueError(f"{what}: {len(data)} bytes; the manifest's layout needs {need}")
    try:
        return {a["name"]: np.frombuffer(data[a["offset"]: a["offset"] + a["nbytes"]], dtype=a["dtype"])
                .reshape(a["shape"]) for a in meta["arrays"]}
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"{what}: the manifest's layout does not fit the data ({e})") from None


def verify_binary(expected: bytes, actual: bytes, meta: dict[str, Any], *, max_errors: int = 20,
                  what: str = "results", family: bool = False) -> VerifyResult:
    """A device's binary file in the vector file's own layout: inputs must be the
    vector's, every output array must match (floats: NaN matches NaN; a block-scaled
    dot's ``c`` within ``c_bound``, the model-family bound; a unit GEMM's ``d`` bit for
    bit, or with ``family`` within ``d_bound`` of ``d_exact``)."""
    exp = _unpack_arrays(expected, meta, "expected")
    got = _unpack_arrays(actual, meta, what)
    outputs = OUTPUT_ARRAYS[meta["operation"]]
    for name, arr in exp.items():
        if name not in outputs and name not in ("c_exact", "c_bound", "d_exact", "d_bound") and not np.array_equal(
                arr.view(np.uint8), got[name].view(np.uint8)):
            raise ValueError(f"{what}: input array {name!r} differs from the vector file's")
    res = VerifyResult()
    for name in outputs:
        e, g = exp[name], got[name]
        if meta["operation"] == "unit_gemm":
            from .gemm_vectors import ulps_apart, verify_gemm

            ok, _ = verify_gemm(exp, got, family)
            n_cols = e.shape[1]
            for idx in np.argwhere(~ok)[: max(0, max_errors - len(res.messages))]:
                i, j = int(idx[0]), int(idx[1])
                gap = "" if not (np.isfinite(e[i, j]) and np.isfinite(g[i, j])) else \
                    f", {int(ulps_apart(e[i, j], g[i, j]))} ulp apart"
                ub, dg = f"u{e.itemsize}", 17 if e.itemsize == 8 else 9  # the fp64 units' D: uint64 patterns
                res.messages.append(f"D[{i}, {j}] (output {i * n_cols + j}): expected {float(e[i, j]):.{dg}g} "
                                    f"({int(e[i:i + 1, j].view(ub)[0]):#010x}), got {float(g[i, j]):.{dg}g} "
                                    f"({int(g[i:i + 1, j].view(ub)[0]):#010x}){gap}"
                                    + (f"; family bound {float(exp['d_bound'][i, j]):.9g} around "
                                       f"{float(exp['d_exact'][i, j]):.9g}" if family else ""))
            res.cases += int(ok.size)
            res.failed += int((~ok).sum())
            exact_ok = ok if not family else verify_gemm(exp, got, False)[0]
            if not exact_ok.all():
                from .gemm_vectors import explain_gemm

                res.explained_by = explain_gemm(exp, got, meta)
                if ok.all():  # within the tolerance, yet not the unit's bits: say so
                    res.note = (f"{int((~exact_ok).sum())} of {ok.size} outputs differ from "
                                f"{(meta.get('unit') or {}).get('name')} bit for bit, within the family bound "
                                "(which cannot tell a reversed K, an epilogue C, a split K or a plain fp32 "
                                "loop from the unit)")
            continue
        if name == "c":
            ok = (e.view(np.uint32) == g.view(np.uint32)) | (np.isnan(e) & np.isnan(g))
            with np.errstate(invalid="ignore"):
                ok |= np.abs(g.astype(np.float64) - e) <= exp["c_bound"]
        elif e.dtype.kind == "f":
            ok = (e.view(f"u{e.itemsize}") == g.view(f"u{g.itemsize}")) | (np.isnan(e) & np.isnan(g))
        else:
            ok = e == g
        res.cases += int(ok.size)
        bad = np.argwhere(~ok)
        res.failed += int(bad.shape[0])
        for idx in bad[: max(0, max_errors - len(res.messages))]:
            t = tuple(int(i) for i in idx)
            res.messages.append(f"{name}{list(t)}: expected {e[t]!r}, got {g[t]!r}")
    return res
