"""``fmtsim checkpoint inspect``: which producer and scheme wrote each layer, what the codes
and scales hold, and lint findings with names.

Per quantized tensor: a summary of its code histogram (NaN codes, -0, codes at the largest
magnitude = the saturation share, subnormal codes, how many finite codes never occur), its
scale statistics, and findings:

    error    nan-scale, inf-scale, negative-scale, zero-scale (a scale of 0 under non-zero codes:
             uninitialised), e8m0-nan (E8M0 byte 0xFF), global-direction (an NVFP4 global scale
             whose magnitude fits the other convention: multiplier vs divisor), missing-scale (FP8
             or packed FP4 weights with no scale a record knows, or codes of a record the config marks
             without that record's scales), nan-scale / inf-scale / negative-scale on a
             pre_quant_scale too, ambiguous (several records with
             different rules fit and no config says which), block-shape (block scales whose block
             shape no config states and several shapes fit, or that do not cover the codes in the
             stated blocks), layout (any other geometry dequantize refuses)
    warning  e8m0-linear (E8M0 bytes that look like small linear integers), swizzled-scales (the
             scale matrix is far smoother read through the 128x4 swizzle), nibble-order (packed FP4
             whose neighbour differences say the two nibbles of each byte are swapped),
             fused-global-scales (gate/up or q/k/v with different NVFP4 global scales), unmatched
             (a scale-like tensor no record claims), zero-scale-empty (a zero scale over all-zero
             codes), block-inferred (a block shape no config states, inferred because it is the
             only one that fits the scale's shape)

The heuristics (direction, swizzle, nibble order, linear E8M0) judge distributions, so they
say "looks"; the others are facts. Exit status 1 when any error is found.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from ..argcheck import path as check_path
from ..codec import decode
from ..formats import get_format
from ..layout import unswizzle_order
from .conversion import ATTENTION_SUFFIXES, is_scale_like
from .dequant import FP8_ELEMENT, BlockShapeError, _scan, layer_plan, ue5m3_values
from .files import DTYPES, CheckpointError, Header, read_array
from .intcodes import unpack_codes, unpack_fp6
from .producers import LayerMatch, codes_without_scales

__all__ = ["Finding", "TensorReport", "InspectReport", "inspect"]


@dataclass
class Finding:
    severity: str  # error | warning
    code: str
    tensor: str
    message: str


@dataclass
class TensorReport:
    tensor: str
    producer: str
    candidates: list[str]
    scheme: str
    element: str
    dtype: str
    shape: list[int]
    codes: dict[str, Any] = field(default_factory=dict)
    scales: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    block: list[int] | None = None  # FP8 2-D block scales: rows x cols one scale covers
    block_source: str = ""  # the config key it was read from, the record, or "inferred ..."
    bits: int = 0  # GPTQ: bits per code, from the config


@dataclass
class InspectReport:
    path: str
    config_producers: list[str]
    producers: dict[str, int]
    tensors: list[TensorReport]
    findings: list[Finding]  # every finding, tensor-level ones included

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["errors"] = self.errors
        d["warnings"] = sum(f.severity == "warning" for f in self.findings)
        return d


def _code_stats(codes: np.ndarray, element: str) -> dict[str, Any]:
    """Histogram summary of unpacked codes of a float element format."""
    f = get_format(element)
    hist = np.bincount(codes.reshape(-1).astype(np.int64), minlength=f.n_codes)
    vals = f.values
    n = int(codes.size)
    finite = np.isfinite(vals)
    mag = np.abs(np.where(finite, vals, 0.0))
    top = mag.max()
    sign_bit = 1 << (f.bits - 1)
    neg_zero = hist[sign_bit] if f.has_neg_zero else 0
    exp_field = (np.arange(f.n_codes) >> f.man_bits) & ((1 << f.exp_bits) - 1)
    sub = finite & (exp_field == 0) & (mag > 0)
    used_finite = int(np.count_nonzero(hist[finite] > 0))
    return {"values": n, "nan_codes": int(hist[np.isnan(vals)].sum()), "inf_codes": int(hist[np.isinf(vals)].sum()),
            "neg_zero": int(neg_zero), "at_max": int(hist[finite & (mag == top)].sum()),
            "at_max_share": float(hist[finite & (mag == top)].sum() / n) if n else 0.0,
            "subnormal": int(hist[sub].sum()), "unused_codes": int(np.count_nonzero(finite)) - used_finite,
            "zero": int(hist[finite & (mag == 0)].sum())}


def _int_code_stats(q: np.ndarray, element: str) -> dict[str, Any]:
    """Histogram summary of signed integer codes (int4: -8..7, int8: -128..127)."""
    lo, hi = {"int4": (-8, 7), "uint4": (0, 15)}.get(element, (-128, 127))
    hist = np.bincount((q.reshape(-1) - lo).astype(np.int64), minlength=hi - lo + 1)
    n = int(q.size)
    return {"values": n, "at_min": int(hist[0]), "at_max": int(hist[-1]), "zero": int(hist[-lo]),
            "at_max_share": float((hist[0] + hist[-1]) / max(n, 1)), "unused_codes": int(np.count_nonzero(hist == 0))}


def _scale_values(m: LayerMatch, raw: np.ndarray) -> np.ndarray:
    fmt = m.producer.scale_format
    if fmt == "e8m0":
        return np.asarray(decode(raw.view(np.uint8), "e8m0", np.float64))
    if fmt == "ue4m3":  # stored as F8_E4M3: read signed, so a negative scale shows
        return np.asarray(decode(raw.view(np.uint8), "e4m3", np.float64))
    if fmt == "ue5m3":  # Quark amdfp4
        return ue5m3_values()[raw.view(np.uint8).astype(np.intp)]
    return raw.astype(np.float64)


def _scale_stats(vals: np.ndarray) -> dict[str, Any]:
    fin = vals[np.isfinite(vals)]
    pos = fin[fin > 0]
    return {"count": int(vals.size), "nan": int(np.count_nonzero(np.isnan(vals))),
            "inf": int(np.count_nonzero(np.isinf(vals))), "zero": int(np.count_nonzero(fin == 0)),
            "negative": int(np.count_nonzero(fin < 0)),
            "min": float(pos.min()) if pos.size else None, "max": float(pos.max()) if pos.size else None,
            "median": float(np.median(pos)) if pos.size else None}


def _smoothness(s: np.ndarray) -> float:
    """Mean |difference| of log2 scale between neighbours along a row (one output channel's blocks:
    alike in a plain layout, from different rows once swizzled)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log2(np.where(s > 0, s, np.nan))
    d = np.abs(np.diff(lg, axis=1)) if lg.shape[1] > 1 else np.empty(0)
    vals = d[np.isfinite(d)]
    return float(vals.mean()) if vals.size else math.nan


def _unpack_fp4(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)


def _fp4_values(m: LayerMatch, packed: np.ndarray, sv: np.ndarray, per: int) -> np.ndarray:
    codes = _unpack_fp4(packed)
    el = np.asarray(decode(codes, "e2m1", np.float64)).reshape(-1, per)
    return (el * sv.reshape(-1)[: el.shape[0], None]).reshape(codes.shape[:-1] + (-1,))


def _bnb_stats(rep: TensorReport, m: LayerMatch, read: Any, entries: dict[str, Any]) -> None:
    """bitsandbytes layers: code histogram (4-bit codes index quant_map; int8 codes) and absmax statistics."""
    from .bnb import bnb4_absmax, bnb4_state

    if m.producer.scheme == "bnb8":
        rep.codes = _int_code_stats(read(m.codes).astype(np.int64), "int8")
        absmax = read(m.scale).astype(np.float64)
    else:
        _, state = bnb4_state(m.layer, entries, read)
        rep.shape = list(state.shape)
        rep.element = state.quant_type + (" (double quantization)" if state.nested_blocksize else "")
        b = read(m.codes).view(np.uint8).reshape(-1)
        codes = np.stack([b >> 4, b & 0x0F], axis=1).reshape(-1)[: state.elements].astype(np.int64)
        qm = read(m.layer + ".weight.quant_map").astype(np.float64).reshape(-1)
        hist = np.bincount(codes, minlength=16)
        top = np.abs(qm) == np.abs(qm).max()
        rep.codes = {"values": int(codes.size), "zero": int(hist[qm == 0].sum()),
                     "at_max": int(hist[top].sum()), "at_max_share": float(hist[top].sum() / max(codes.size, 1)),
                     "unused_codes": int(np.count_nonzero(hist == 0))}
        nested = m.layer + ".weight.nested_quant_map"
        absmax = bnb4_absmax(state, read(m.scale), read(nested) if nested in entries else None,
                             read(m.layer + ".weight.nested_absmax") if nested in entries else None
                             ).astype(np.float64)
    rep.scales = _scale_stats(absmax)
    st = rep.scales
    for code, what, n in (("nan-scale", "NaN", st["nan"]), ("inf-scale", "Inf", st["inf"]),
                          ("negative-scale", "negative", st["negative"])):
        if n:
            rep.findings.append(Finding("error", code, m.scale, f"{n} of {st['count']} absmax values are {what}"))


def _torchao_label(codes_dtype: str, scale_dtype: str) -> str:
    """What a torchao tensor holds, from its stored dtypes (the subclass name is in the file's metadata)."""
    return {("I8", "F32"): "int8 (Int8Tensor)", ("F8_E4M3", "F32"): "e4m3 (Float8Tensor)",
            ("I8", "BF16"): "intx (IntxUnpackedToInt8Tensor)", ("F8_E4M3", "F8_E8M0"): "mxfp8 (MXTensor)",
            ("U8", "F8_E8M0"): "mxfp4 (MXTensor)", ("U8", "F8_E4M3"): "nvfp4 (NVFP4Tensor)"}.get(
        (codes_dtype, scale_dtype), f"{codes_dtype} codes, {scale_dtype} scales")


def _scale_only_stats(rep: TensorReport, m: LayerMatch, read: Any) -> None:
    """optimum-quanto, HQQ and torchao layers: their scales (E8M0 / E4M3 as values) and code count."""
    raw = read(m.scale)
    if raw.dtype == ml_dtypes.float8_e8m0fnu:
        vals = np.exp2(raw.view(np.uint8).astype(np.float64) - 127)
    else:
        vals = raw.astype(np.float64)
    rep.scales = _scale_stats(vals.reshape(-1))
    pts = m.layer + "._weight_per_tensor_scale"
    if m.producer.scheme == "torchao":
        try:
            rep.scales["global"] = float(np.asarray(read(pts), np.float64).reshape(-1)[0])
        except KeyError:
            pass
    codes = read(m.codes)
    rep.codes = {"values": int(codes.size * (2 if codes.dtype == np.uint8 and m.producer.scheme == "torchao" else 1))}
    st = rep.scales
    for code, what, n in (("nan-scale", "NaN", st["nan"]), ("inf-scale", "Inf", st["inf"])):
        if n:
            rep.findings.append(Finding("error", code, m.scale, f"{n} of {st['count']} scales are {what}"))


def _gptq_stats(rep: TensorReport, m: LayerMatch, read: Any, entries: dict[str, Any]) -> None:
    """GPTQ layers: the code histogram (0 .. 2^bits - 1) and scale statistics; bits from the record's plan."""
    from .gptq import gptq_codes

    bits = rep.bits
    raw = read(m.codes)
    q = gptq_codes(raw, bits, raw.shape[0] * 32 // bits)
    hist = np.bincount(q.reshape(-1), minlength=1 << bits)
    n = int(q.size)
    rep.element = f"uint{bits}"
    rep.shape = [int(raw.shape[1]), int(raw.shape[0] * 32 // bits)]
    rep.codes = {"values": n, "at_min": int(hist[0]), "at_max": int(hist[-1]),
                 "at_max_share": float((hist[0] + hist[-1]) / max(n, 1)),
                 "unused_codes": int(np.count_nonzero(hist == 0))}
    rep.scales = _scale_stats(read(m.scale).astype(np.float64))


def _lint_tensor(rep: TensorReport, m: LayerMatch, read: Any, entries: dict[str, Any]) -> None:
    p = m.producer
    find = rep.findings

    def add(sev: str, code: str, msg: str, tensor: str | None = None) -> None:
        find.append(Finding(sev, code, tensor or m.codes, msg))

    if p.scheme in ("bnb4", "bnb8"):
        _bnb_stats(rep, m, read, entries)
        return
    if p.scheme == "gptq":
        _gptq_stats(rep, m, read, entries)
        return
    if p.scheme in ("quanto", "hqq", "torchao", "awq-gemv", "awq-gemv-fast", "awq-marlin"):
        _scale_only_stats(rep, m, read)
        return
    raw_codes = read(m.codes)
    raw_scale = read(m.scale)
    sv = _scale_values(m, raw_scale)
    rep.scales = _scale_stats(sv)
    st = rep.scales
    if p.scheme == "fp8":
        codes = raw_codes.view(np.uint8)
        rep.codes = _code_stats(codes, rep.element)
    elif p.scheme in ("nvfp4", "mxfp4"):
        codes = _unpack_fp4(raw_codes.view(np.uint8))
        rep.codes = _code_stats(codes, "e2m1")
    elif p.packing == "fp6":
        codes = unpack_fp6(raw_codes)
        rep.codes = _code_stats(codes, p.element)
    else:
        shape = read(m.shape_tensor).reshape(-1) if m.shape_tensor else None
        try:  # the padding of a dense packing's last word is not a code
            q = unpack_codes(p.packing, raw_codes, p.element != "uint4", int(shape[-1]) if shape is not None else None)
        except CheckpointError:  # a shape tensor that does not fit: reported where the plan is checked
            q = unpack_codes(p.packing, raw_codes, p.element != "uint4")
        rep.codes = _int_code_stats(q, p.element)
        codes = None
    shaped = sv.reshape(raw_scale.shape)

    def first(mask: np.ndarray) -> str:
        return f", first at {[int(i) for i in np.argwhere(mask)[0]]}" if mask.ndim and mask.any() else ""

    if st["nan"]:
        add("error", "nan-scale", f"{st['nan']} of {st['count']} scales are NaN{first(np.isnan(shaped))}", m.scale)
    if st["inf"]:
        add("error", "inf-scale", f"{st['inf']} of {st['count']} scales are Inf{first(np.isinf(shaped))}", m.scale)
    if st["negative"]:
        add("error", "negative-scale", f"{st['negative']} of {st['count']} scales are negative"
            f"{first(shaped < 0)}", m.scale)
    if p.scale_format == "e8m0":
        b = raw_scale.view(np.uint8)
        n_ff = int(np.count_nonzero(b == 0xFF))
        if n_ff:
            at = [int(i) for i in np.unravel_index(int(np.argmax(b == 0xFF)), b.shape)]
            add("error", "e8m0-nan", f"{n_ff} E8M0 scale byte(s) are 0xFF (NaN), first at {at}", m.scale)
        if b.size and int(b.max()) < 64:
            add("warning", "e8m0-linear", f"every scale byte is below 64 (max {int(b.max())}): as E8M0 that is "
                "< 2^-63; they look like linear values, not E8M0 exponents", m.scale)
    if st["zero"]:
        # which zero scales sit over non-zero codes?
        if p.scheme == "fp8" and sv.size > 1 and rep.codes.get("zero", 0) < rep.codes["values"]:
            add("error", "zero-scale", f"{st['zero']} scale(s) are 0 (uninitialised?){first(shaped == 0)}", m.scale)
        elif p.scheme == "fp8":
            add("error" if rep.codes.get("zero", 0) < rep.codes["values"] else "warning", "zero-scale",
                "the scale is 0", m.scale)
        else:
            per = p.block[1] if p.block else max(1, raw_codes.size * 2 // max(raw_scale.size, 1))
            blocks = codes.reshape(-1, per) if p.scheme in ("nvfp4", "mxfp4") else None
            if blocks is not None:
                nonzero = np.any((blocks & 0x7) != 0, axis=1)
                bad = int(np.count_nonzero((sv.reshape(-1) == 0) & nonzero))
                if bad:
                    add("error", "zero-scale", f"{bad} zero scale(s) over non-zero codes (uninitialised?)", m.scale)
                else:
                    add("warning", "zero-scale-empty", f"{st['zero']} zero scale(s), all over zero codes", m.scale)
            else:
                add("error", "zero-scale", f"{st['zero']} scale(s) are 0", m.scale)
    if m.pre_scale:  # folded into every column of the weight: a NaN, Inf or non-positive one is a bad column
        pre = np.asarray(read(m.pre_scale)).astype(np.float64).reshape(-1)
        for code, what, mask in (("nan-scale", "NaN", np.isnan(pre)), ("inf-scale", "Inf", np.isinf(pre)),
                                 ("negative-scale", "negative or zero", ~np.isnan(pre) & (pre <= 0))):
            if mask.any():
                add("error", code, f"{int(np.count_nonzero(mask))} of {pre.size} pre_quant_scale values are {what}, "
                    f"first at column {int(np.argmax(mask))} (dequantize folds it into that column)", m.pre_scale)
    if p.global_scale and m.global_scale:
        g = float(read(m.global_scale).astype(np.float64).reshape(-1)[0])
        rep.scales["global"] = g
        if not math.isfinite(g) or g <= 0:
            add("error", "nan-scale" if math.isnan(g) else "negative-scale" if g < 0 else "zero-scale",
                f"global scale is {g}", m.global_scale)
        else:
            amax_claimed = g * 2688.0 if p.global_direction == "multiplier" else 2688.0 / g
            amax_other = 2688.0 / g if p.global_direction == "multiplier" else g * 2688.0
            rep.scales["implied_amax"] = amax_claimed

            def plausible(a: float) -> bool:
                return 1e-4 <= a <= 1e3

            if not plausible(amax_claimed) and plausible(amax_other):
                other = "divisor" if p.global_direction == "multiplier" else "multiplier"
                add("error", "global-direction",
                    f"{m.global_scale} = {g:.6g}: as a {p.global_direction} ({p.name}) the weights' amax would be "
                    f"{amax_claimed:.3g}; as a {other} {amax_other:.3g}: it looks like the other convention",
                    m.global_scale)
    if p.scheme in ("nvfp4", "mxfp4") and raw_scale.ndim == 2:
        rows, cols = raw_scale.shape
        if rows % 128 == 0 and cols % 4 == 0 and rows * cols >= 512:
            plain = _smoothness(sv.reshape(rows, cols))
            # where each stored scale lands when read through the 128x4 swizzle
            uns = sv.reshape(-1)[unswizzle_order(rows, cols)]
            through = _smoothness(uns)
            rep.scales["smoothness"] = {"as_stored": plain, "through_unswizzle": through}
            if math.isfinite(plain) and math.isfinite(through) and through < 0.5 * plain and plain > 0.25:
                add("warning", "swizzled-scales", f"the scales are {plain / max(through, 1e-9):.1f}x smoother read "
                    "through the 128x4 swizzle: they look swizzled (stored as kernels read them)", m.scale)
    if p.scheme in ("nvfp4", "mxfp4"):
        per = p.block[1] if p.block else max(1, raw_codes.size * 2 // max(raw_scale.size, 1))
        vals = _fp4_values(m, raw_codes.view(np.uint8), sv, per)
        flat = vals.reshape(-1, vals.shape[-1])
        if flat.shape[1] >= 4:
            within = np.abs(flat[:, 1::2] - flat[:, 0::2])
            across = np.abs(flat[:, 2::2] - flat[:, 1:-1:2])
            w, a = float(np.nanmean(within)), float(np.nanmean(across))
            rep.codes["neighbour_diff"] = {"within_byte": w, "across_bytes": a}
            if w > 0 and a > 1.5 * w:
                add("warning", "nibble-order", f"values across byte boundaries differ {a / w:.1f}x more than inside "
                    "a byte: the two nibbles of each byte look swapped (element 2i belongs in the low nibble)")


def inspect(path: str | Path, producer: str | None = None) -> InspectReport:
    """Detect producers, summarise every quantized tensor and lint; see the module docstring."""
    check_path(path, "inspect: path")
    source, headers, where, configs, det = _scan(path, producer)
    cache: dict[str, np.ndarray] = {}

    def read(name: str) -> np.ndarray:
        if name not in cache:
            h: Header = headers[where[name]]
            with open(h.path, "rb") as fh:
                cache[name] = read_array(fh, h, h.entries[name])
        return cache[name]

    entries = {n: headers[where[n]].entries[n] for n in where}
    reports: list[TensorReport] = []
    findings: list[Finding] = []
    claimed: set[str] = set()
    for name, m in sorted(det.layers.items()):
        e = entries[name]
        element = m.element
        label = m.producer.name if (m.producer.name in det.config_producers or len(m.candidates) == 1) else \
            " | ".join(m.candidates)
        rep = TensorReport(name, label, list(m.candidates), m.producer.scheme, element, e.dtype, list(e.shape))
        try:  # the geometry dequantize would use: a layout it refuses is an error here, not "clean"
            tj = layer_plan(m, entries, configs, read)
        except CheckpointError as err:
            msg = str(err).split(": ", 1)[1] if str(err).startswith(name) else str(err)
            code = "block-shape" if isinstance(err, BlockShapeError) else "layout"
            rep.findings.append(Finding("error", code, name, msg + " (dequantize refuses it)"))
        else:
            rep.bits = tj.bits
            if m.producer.scheme in ("quanto", "hqq", "torchao", "awq-gemv", "awq-gemv-fast", "awq-marlin", "w4a16",
                                     "gptq"):
                rep.shape = list(tj.out_shape)  # packed words say little: the weight's own shape
            if tj.qtype:
                rep.element = tj.qtype
            if tj.bits:
                rep.element = f"uint{tj.bits}"
            if m.producer.scheme == "hqq":
                rep.element = f"uint{int(read(m.layer + '.nbits').reshape(-1)[0])}"
            if m.producer.scheme == "torchao":
                rep.element = _torchao_label(e.dtype, entries[m.scale].dtype)
            if tj.block_source:
                rep.block, rep.block_source = list(tj.block or ()), tj.block_source
            if tj.block_source.startswith("inferred"):
                rep.findings.append(Finding("warning", "block-inferred", name, f"block shape {tj.block_source}; "
                                            "no config key states it"))
        if not m.producer.refuse and not any(f.severity == "error" for f in rep.findings):
            _lint_tensor(rep, m, read, entries)  # a layout it cannot plan has no statistics (the error says why)
        cache.clear()
        reports.append(rep)
        findings += rep.findings
        claimed |= {x for x in (m.codes, m.scale, m.global_scale, m.zero_point, m.shape_tensor, m.pre_scale) if x}
        claimed |= {m.layer + s for s in m.producer.extra}
    for name, cands in sorted(det.ambiguous.items()):
        findings.append(Finding("error", "ambiguous", name, f"fits {', '.join(cands)} with different rules and no "
                                "config file says which; choose with --producer"))
        claimed.add(name)
    layers_with_globals: dict[str, float] = {r.tensor: r.scales["global"] for r in reports if "global" in r.scales}
    for a_name, b_names in (("gate_proj", ("up_proj",)), ("q_proj", ("k_proj", "v_proj"))):
        for t, g in layers_with_globals.items():
            if f".{a_name}." not in t:
                continue
            for b in b_names:
                other = t.replace(f".{a_name}.", f".{b}.")
                if other in layers_with_globals and layers_with_globals[other] != g:
                    findings.append(Finding("warning", "fused-global-scales", t,
                                            f"global scale {g:.6g} differs from {other}'s "
                                            f"{layers_with_globals[other]:.6g}; fused kernels assume one"))
    without_scales = {n: (p, missing) for n, p, missing in
                      codes_without_scales({n: entries[n].dtype for n in where}, configs, det)}
    for name in sorted(where):
        if name in claimed or name in det.layers or name.endswith(ATTENTION_SUFFIXES):
            continue  # attention / KV-cache scales belong to the attention, not to a weight
        dt = entries[name].dtype
        lacking = without_scales.get(name)
        if lacking:
            p, missing = lacking
            findings.append(Finding("error", "missing-scale", name, f"{dt} codes of {p.title} "
                                    f"without {' and '.join(missing)}"))
            claimed |= {name[: -len(p.codes)] + s for s in (p.scale, p.global_scale, p.zero_point) if s}
        elif dt in FP8_ELEMENT and not is_scale_like(name):
            findings.append(Finding("error", "missing-scale", name, f"an FP8 ({dt}) tensor with no scale any "
                                    "producer record knows"))
        elif dt == "U8" and (name.endswith(("_blocks", ".blocks", "weight_packed"))):
            findings.append(Finding("error", "missing-scale", name, "packed FP4 with no scale a record knows"))
        elif is_scale_like(name) and dt in DTYPES:
            findings.append(Finding("warning", "unmatched", name, f"a scale-like tensor ({dt}) no producer record "
                                    "claims"))
    order = {"error": 0, "warning": 1}
    findings.sort(key=lambda f: (order.get(f.severity, 2), f.tensor, f.code))
    return InspectReport(str(source.path), list(det.config_producers), det.producers, reports, findings)
