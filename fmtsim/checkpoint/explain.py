"""``fmtsim checkpoint explain`` and ``fmtsim checkpoint diff``: which recipe made a quantized
checkpoint, block by block, and how two quantizations of the same weights differ.

explain QUANT --original ORIG: every quantized tensor of QUANT (producer records, as dequantize
names them) is re-quantized from ORIG's tensor of the same output name with each fmtsim recipe,
and the bytes compared block by block:

    fp8    scale  amax/448 (a float32 division, DeepSeek / ModelOpt / compressed-tensors), or a
                  power of two by each E8M0 rule (floor / ceil / even / rceil)
           codes  RNE, saturating, of x / s ("divide") or of x * fl(1/s) ("reciprocal")
    mxfp4  fmtsim.mx.quantize(scale_rule = floor / ceil / even / rceil), RNE elements; ModelOpt's
           zeros written as 0x8; Quark's E8M0 code 0 written as 0x01 (MXFP6 too)
    nvfp4  fmtsim.nvfp4.quantize(recipe = te / torchao), the global scale in the producer's
           convention (multiplier or divisor, stored as fl(1/G) or as fl(2688/amax)); from the
           stored global scale g: amax / 6 / g, and ModelOpt's and Quark's amax / (6 * g) with
           their rules for a zero or underflowing block scale (:func:`_nvfp4_one_division`)
    Quark  amdfp4 (UE5M3 block scales, :func:`_explain_amdfp4`), MXFP6 (:func:`_explain_mxfp6`),
           int4_fp8 (two stages, :func:`_explain_int4_fp8`)

A block is explained by a recipe when its scale bytes and every element code are the ones the
recipe writes. The report names the recipe that explains most blocks and lists the blocks no
recipe explains, with the expected and found bytes.

diff A B: tensors of the same name; how many scale bytes differ and by how many steps (E8M0
exponent steps; UE4M3/F8 code steps; float scales as a ratio), how many element codes differ,
and with ``original`` the recipe each follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from .. import mx, nvfp4
from ..argcheck import path as check_path
from ..codec import decode, encode
from ..fnuz import PAIRS, ocp_to_fnuz
from ..formats import get_format
from .dequant import _out_name, _scan, layer_plan
from .files import CheckpointError, Header, load, read_array
from .producers import LayerMatch

FNUZ_OCP = {fnuz: ocp for ocp, fnuz in PAIRS.items()}  # e4m3fnuz -> e4m3: the OCP format it was converted from

__all__ = ["explain", "diff", "TensorExplanation", "BlockMiss", "TensorDiff"]

F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)
MX_RULES = ("floor", "ceil", "even", "rceil")


@dataclass
class BlockMiss:
    block: list[int]  # block coordinates (row block, column block) or (..., group)
    recipe: str  # the best recipe's expectation
    expected_scale: str
    found_scale: str
    element: int | None = None  # first differing element (index inside the block)
    expected_code: int | None = None
    found_code: int | None = None
    detail: str | None = None  # where codes are not one per element (GGUF blocks): what differs, in words


@dataclass
class TensorExplanation:
    tensor: str
    producer: str
    blocks: int
    by_recipe: dict[str, int]  # recipe -> blocks it explains
    best: str
    unexplained: int
    misses: list[BlockMiss] = field(default_factory=list)  # the first few unexplained blocks
    notes: list[str] = field(default_factory=list)


def _reader(path: str | Path, producer: str | None) -> tuple[Any, dict[str, LayerMatch], Any]:
    source, headers, where, configs, det = _scan(path, producer)
    if det.ambiguous:
        name, cands = next(iter(sorted(det.ambiguous.items())))
        raise CheckpointError(f"{name}: fits {', '.join(cands)} with different rules; choose with --producer")
    entries = {n: headers[where[n]].entries[n] for n in where}

    def read(name: str) -> np.ndarray:
        h: Header = headers[where[name]]
        with open(h.path, "rb") as fh:
            return read_array(fh, h, h.entries[name])

    return read, det.layers, (entries, configs)


def _fp4_codes(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)


def _compare(found_s: np.ndarray, found_c: np.ndarray, cands: dict[str, tuple[np.ndarray, np.ndarray]],
             coords: Any, fmt_scale: Any, bounds: dict[str, np.ndarray] | None = None
             ) -> tuple[dict[str, int], str, np.ndarray, list[BlockMiss]]:
    """found_s [B] scale keys, found_c [B, n] codes; cands recipe -> (scale keys [B], codes [B, n]);
    bounds recipe -> [B] whether the block lies within a recipe's bounds (a check, not a reproduction)."""
    ok = {r: (s == found_s) & np.all(c == found_c, axis=1) for r, (s, c) in cands.items()}
    ok.update(bounds or {})
    by = {r: int(np.count_nonzero(v)) for r, v in ok.items()}
    top = max(by.values()) if by else 0
    tied = [r for r in by if by[r] == top]
    best = " = ".join(tied) if by and top else (tied[0] if by else "-")
    any_ok = np.zeros(found_s.shape[0], bool)
    for v in ok.values():
        any_ok |= v
    misses = []
    shown = next((r for r in tied if r in cands), max(cands, key=lambda r: by[r]) if cands else None)
    if best != "-" and shown is not None:
        es, ec = cands[shown]
        for b in np.flatnonzero(~any_ok)[:10]:
            diff = np.flatnonzero(ec[b] != found_c[b])
            i = int(diff[0]) if diff.size else None
            misses.append(BlockMiss(coords(int(b)), shown, fmt_scale(es[b]), fmt_scale(found_s[b]), i,
                                    int(ec[b, i]) if i is not None else None,
                                    int(found_c[b, i]) if i is not None else None))
    return by, best, ~any_ok, misses


def _fp8_candidates(wb: np.ndarray, valid: np.ndarray, amax: np.ndarray, stored: np.ndarray, sdt: np.dtype,
                    element: str, fused_amax: float | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Recipe -> (scale bits as uint32, element codes) for FP8 blocks ``wb`` quantized to ``element``: the
    scale rules (amax / the format's max, rounded to the stored dtype; powers of two) and the code rules
    (divide, multiply by the reciprocal, a bfloat16 quotient), the codes computed with the ``stored`` scale."""
    fmax = F32(get_format(element).max_finite)
    # candidates are rounded to the scale's stored dtype (BF16 scales are common), then compared in float32
    scale_cands = {"amax/max": (amax / fmax).astype(F32).astype(sdt).astype(F32)}
    if fused_amax is not None and amax.size == 1:  # one scale for fused projections (ModelOpt's q/k/v, gate/up)
        scale_cands["fused amax/max"] = (np.full(1, fused_amax, F32) / fmax).astype(F32).astype(sdt).astype(F32)
    elem_name = "e4m3" if element.startswith("e4m3") else "e5m2"
    for rule in MX_RULES:
        p2 = np.exp2(mx.scale_codes(amax, elem_name, rule).astype(np.float64) - 127)
        scale_cands[f"pow2-{rule}"] = p2.astype(F32)
    cands = {}
    sfull = stored[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q32 = (wb / sfull).astype(F32)
        div = np.where(valid, np.asarray(encode(q32, element)), 0).astype(np.uint8)
        mul = np.where(valid, np.asarray(encode((wb * (F32(1) / sfull).astype(F32)).astype(F32), element)), 0
                       ).astype(np.uint8)
        # torch divides a bfloat16 weight by a 0-d or bfloat16 scale in bfloat16: the quotient is rounded to
        # bfloat16 before the E4M3 cast (compressed-tensors, Quark, ModelOpt per tensor)
        bq = np.where(valid, np.asarray(encode(q32.astype(BF16).astype(F32), element)), 0).astype(np.uint8)
    for sname, sc in scale_cands.items():
        for ename, c in (("divide", div), ("reciprocal", mul), ("bfloat16 quotient", bq)):
            cands[f"scale {sname}, codes {ename}"] = (sc.view(np.uint32), c)
        cands[f"scale {sname}, codes bfloat16 quotient, no -0"] = (sc.view(np.uint32), _no_neg_zero(bq, 0x80))
    return cands


def _explain_fp8(m: LayerMatch, tj: Any, read: Any, w: np.ndarray, fused_amax: float | None = None
                 ) -> TensorExplanation:
    codes = read(m.codes).view(np.uint8)
    s_raw = read(m.scale)
    s = s_raw.astype(F32)
    sdt = s_raw.dtype
    element = tj.match.element
    rows, cols = codes.shape
    br, bc = tj.block
    nrb, ncb = -(-rows // br), -(-cols // bc)
    pr, pc = nrb * br - rows, ncb * bc - cols
    wp = np.pad(w.astype(F32), ((0, pr), (0, pc)))
    cp = np.pad(codes, ((0, pr), (0, pc)))
    wb = wp.reshape(nrb, br, ncb, bc).transpose(0, 2, 1, 3).reshape(nrb * ncb, br * bc)
    cb = cp.reshape(nrb, br, ncb, bc).transpose(0, 2, 1, 3).reshape(nrb * ncb, br * bc)
    valid = np.pad(np.ones((rows, cols), bool), ((0, pr), (0, pc))).reshape(nrb, br, ncb, bc).transpose(
        0, 2, 1, 3).reshape(nrb * ncb, br * bc)
    amax = np.max(np.abs(wb), axis=1).astype(F32)
    stored = s.reshape(-1).astype(F32)
    if element in FNUZ_OCP:  # the OCP recipes followed by the OCP -> FNUZ conversion, and FNUZ's own recipes
        ocp = FNUZ_OCP[element]
        lut = ocp_to_fnuz(np.arange(256, dtype=np.uint8), ocp, inf="nan")[0]
        with np.errstate(over="ignore"):
            half = (stored / F32(2)).astype(F32)
        cands = {f"{k}, then OCP -> FNUZ (scale x2)": ((sc.view(F32) * F32(2)).astype(F32).view(np.uint32), lut[c])
                 for k, (sc, c) in _fp8_candidates(wb, valid, amax, half, sdt, ocp, fused_amax).items()}
        cands.update(_fp8_candidates(wb, valid, amax, stored, sdt, element, fused_amax))
    else:
        cands = _fp8_candidates(wb, valid, amax, stored, sdt, element, fused_amax)

    def coords(b: int) -> list[int]:
        return [b // ncb, b % ncb]

    by, best, miss, misses = _compare(stored.view(np.uint32), np.where(valid, cb, 0).astype(np.uint8), cands, coords,
                                      lambda k: repr(float(np.uint32(k).view(F32))))
    return TensorExplanation(m.codes, m.producer.name, int(stored.size), by, best, int(np.count_nonzero(miss)), misses)


def _no_neg_zero(codes: np.ndarray, sign: int) -> np.ndarray:
    """Quark writes +0 where the rounded value is -0."""
    return np.where(codes == sign, 0, codes).astype(np.uint8)


def _ties_to_zero(y: np.ndarray, element: str) -> np.ndarray:
    """Nearest, ties toward zero (ModelOpt MXFP4's elements): RNE codes, except at an exact midpoint."""
    rne = np.asarray(encode(y, element), np.uint8)
    rtz = np.asarray(encode(y, element, rounding="rtz"), np.uint8)
    v_rne = np.asarray(decode(rne, element, np.float64))
    v_rtz = np.asarray(decode(rtz, element, np.float64))
    y64 = y.astype(np.float64)
    tie = (v_rne != v_rtz) & (np.abs(y64 - v_rtz) == np.abs(v_rne - y64))
    return np.where(tie, rtz, rne).astype(np.uint8)


def _pow2_scale_rules(amax: np.ndarray, fmax: float, elem: str) -> dict[str, np.ndarray]:
    """E8M0 codes per block: the OCP rules, and 2^floor / 2^ceil of amax / fmax computed in float32 or
    bfloat16 (compressed-tensors: floor(log2(amax / max)); ModelOpt: ceil)."""
    out = {f"mx {rule}": np.asarray(mx.scale_codes(amax, elem, rule), np.int64) for rule in MX_RULES}
    for qname, q in (("float32", (amax.astype(F32) / F32(fmax)).astype(F32)),
                     ("bfloat16", (amax.astype(BF16).astype(F32) / F32(fmax)).astype(BF16).astype(F32))):
        mant, ex = np.frexp(q.astype(np.float64))  # q = mant * 2^ex, mant in [0.5, 1)
        fl = ex - 1
        ce = np.where(mant == 0.5, ex - 1, ex)
        ok = q > 0
        out[f"floor(log2(amax/{fmax:g})) in {qname}"] = np.where(ok, np.clip(fl + 127, 0, 254), 0)
        out[f"ceil(log2(amax/{fmax:g})) in {qname}"] = np.where(ok, np.clip(ce + 127, 0, 254), 0)
    return out


def _mx_candidates(x: np.ndarray, per: int, element: str, fmax: float, neg_zero: int
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """x [B, per] blocks -> recipe -> (E8M0 codes [B], element codes [B, per])."""
    amax = np.max(np.abs(x), axis=1)
    cands = {}
    for sname, k in _pow2_scale_rules(amax, fmax, element).items():
        y = (x.astype(np.float64) * np.exp2(127 - k.astype(np.float64))[:, None]).astype(F32)
        rne = np.asarray(encode(y, element), np.uint8)
        cands[f"scale {sname}, RNE"] = (k.astype(np.uint8), rne)
        cands[f"scale {sname}, RNE, no -0"] = (k.astype(np.uint8), _no_neg_zero(rne, neg_zero))
        cands[f"scale {sname}, ties toward zero"] = (k.astype(np.uint8), _ties_to_zero(y, element))
        if sname.startswith("mx "):
            # Quark 0.13 writes an E8M0 scale through torch/utils/numerics.py to_e8m0_uint8, whose safe_log2
            # clamps the scale to 2^-126 first: code 0 (an all-zero block's) is written as 0x01, the elements
            # having been quantized with the unclamped scale
            cands[f"scale {sname}, RNE, no -0, {QUARK_E8M0_MIN}"] = (np.maximum(k, 1).astype(np.uint8),
                                                                     _no_neg_zero(rne, neg_zero))
    return cands


QUARK_E8M0_MIN = "E8M0 code 0 written as 0x01 (Quark)"


def _explain_mxfp8(m: LayerMatch, tj: Any, read: Any, w: np.ndarray) -> TensorExplanation:
    codes = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    per = tj.block[1]
    element = tj.match.element
    x = w.astype(F32).reshape(-1, per)
    if element in FNUZ_OCP:  # an OCP MXFP8 recipe, then OCP -> FNUZ: each E8M0 scale one step up (x2)
        ocp = FNUZ_OCP[element]
        lut = ocp_to_fnuz(np.arange(256, dtype=np.uint8), ocp, inf="nan")[0]
        cands = {f"{k}, then OCP -> FNUZ (scale x2)": (np.where(k8 < 0xFE, k8 + 1, 0xFF).astype(np.uint8), lut[c])
                 for k, (k8, c) in _mx_candidates(x, per, ocp, float(get_format(ocp).max_finite), 0x80).items()}
    else:
        cands = _mx_candidates(x, per, element, float(get_format(element).max_finite), 0x80)
    groups = scales.size // max(1, w.shape[0])

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes.reshape(-1, per), cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)), misses)


MODELOPT_MXFP4 = ("scale ceil(log2(amax/6)) in float32, ties toward zero, a zero element written as 0x8 "
                  "(ModelOpt MXFP4QTensor)")


def _explain_mxfp4(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    packed = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    codes = _fp4_codes(packed).reshape(scales.size, 32)
    x = w.astype(F32).reshape(-1, w.shape[-1])
    cands = {}
    for rule in MX_RULES:
        q = mx.quantize(x, "mxfp4", axis=-1, block_size=32, scale_rule=rule)
        cands[f"mx scale {rule}, RNE"] = (np.asarray(q.scales, np.uint8).reshape(-1), q.codes.reshape(-1, 32))
    for k, v in _mx_candidates(x.reshape(-1, 32), 32, "e2m1", 6.0, 0x8).items():
        cands.setdefault(k, v)
    # ModelOpt's cast_fp4 takes the sign bit from (2 - sign(y)) // 2: 1 for y < 0 and for y = +-0
    ks, kc = cands["scale ceil(log2(amax/6)) in float32, ties toward zero"]
    y = (x.reshape(-1, 32).astype(np.float64) * np.exp2(127 - ks.astype(np.float64))[:, None]).astype(F32)
    cands[MODELOPT_MXFP4] = (ks, np.where(y == 0, 0x8, kc).astype(np.uint8))
    groups = scales.size // x.shape[0] if x.shape[0] else 1

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)), misses)


def ue5m3_encode(x: np.ndarray) -> np.ndarray:
    """float32 / float64 values -> UE5M3 bytes, round to nearest, ties to the even code, after clamping
    to [0, 114688] (0xFE, the largest finite value): how AMD Quark 0.13 rounds an amdfp4 block scale
    (``torch/kernel/float8_e5m3/reference.py``, ``BaseFP8_E5M3`` min 0 and max 114688). NaN gives 0xFF."""
    from .dequant import ue5m3_values

    v = ue5m3_values()[:255]  # finite codes 0x00..0xFE, increasing
    a = np.asarray(x, np.float64)
    c = np.clip(np.nan_to_num(a, nan=0.0), 0.0, v[-1])
    hi = np.clip(np.searchsorted(v, c, side="left"), 1, 254)  # v[hi - 1] < c <= v[hi] (or c = 0)
    lo = hi - 1
    d_lo, d_hi = c - v[lo], v[hi] - c  # exact: both in float64 with at most 24 + 4 significant bits
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    return np.where(np.isnan(a), 0xFF, pick).astype(np.uint8)


def _explain_amdfp4(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    """Quark amdfp4 (``quantization/observer/observer.py`` ``get_scale``, scale_format e5m3): block scale
    s = amax / 6 (amax of the bfloat16 weight, divided in bfloat16 or float32; 0 -> float32 eps), rounded
    to UE5M3 (:func:`ue5m3_encode`); elements e2m1 of x / s, RNE, in float32 or rounded to bfloat16 first."""
    from .dequant import ue5m3_values

    packed = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    per = w.size // max(1, scales.size)
    codes = _fp4_codes(packed).reshape(scales.size, per)
    x = w.astype(F32).reshape(-1, per)
    amax = np.max(np.abs(x), axis=1)
    cands = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for aname, a6 in (("bfloat16", (amax.astype(BF16).astype(F32) / F32(6)).astype(BF16).astype(F32)),
                          ("float32", (amax / F32(6)).astype(F32))):
            k = ue5m3_encode(np.where(a6 == 0, np.finfo(F32).eps, a6))
            s = ue5m3_values()[k].astype(F32)[:, None]
            q32 = (x / s).astype(F32)
            for qname, y in (("float32", q32), ("bfloat16", q32.astype(BF16).astype(F32))):
                c = np.asarray(encode(y, "e2m1"), np.uint8)
                label = f"scale ue5m3(amax/6 in {aname}), RNE; elements e2m1(x / s in {qname}), RNE"
                cands[label] = (k, c)
                cands[label + ", no -0"] = (k, _no_neg_zero(c, 0x8))
    groups = scales.size // max(1, w.shape[0])

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)), misses)


def _explain_mxfp6(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    """Quark MXFP6 (e2m3 / e3m2, 32 per E8M0 scale): the MX scale rules of :func:`_mx_candidates`; Quark's
    ``scale_calculation_mode: even`` is ``quantization/utils.py`` ``even_round`` (the OCP rounding of amax
    to a power of two, fmtsim's ``even``)."""
    from .intcodes import unpack_fp6

    element = m.producer.element
    scales = read(m.scale).view(np.uint8).reshape(-1)
    codes = unpack_fp6(read(m.codes)).reshape(scales.size, 32)
    x = w.astype(F32).reshape(-1, 32)
    fmax = float(get_format(element).max_finite)  # 7.5 (e2m3) or 28 (e3m2)
    cands = _mx_candidates(x, 32, element, fmax, 0x20)
    groups = scales.size // max(1, w.shape[0])

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)), misses)


def _explain_int4_fp8(m: LayerMatch, tj: Any, read: Any, w: np.ndarray) -> TensorExplanation:
    """Quark int4_fp8 (``quantization/tensor_quantize.py`` ``SequentialQuantize``: an FP8 per-tensor
    quantizer, then an int4 per-channel one observing the first's output): global scale g = amax / 448
    (float32); the FP8 stage's output x8 = e4m3(x / g), the quotient in float32 or bfloat16, kept as the
    E4M3 value (not multiplied back by g); the per-row scale amax(x8) / 7.5 (symmetric int4: (7 - (-8)) / 2,
    ``observer.py`` ``calculate_int_quant_params``), in float32 or bfloat16, stored as float32; codes
    rint(x8 / s) + zp clamped to [-8, 7], the quotient in float32 or bfloat16. A block is one output row."""
    from .intcodes import unpack_codes, unpack_zero_point

    p = m.producer
    assert m.global_scale is not None
    q = unpack_codes(p.packing, read(m.codes), True, cols=tj.out_shape[1]).astype(np.int64)
    rows = q.shape[0]
    raw = read(m.scale)
    s_found = raw.astype(F32).reshape(-1)
    g_found = read(m.global_scale).astype(F32).reshape(-1)[0]
    zp = np.zeros(rows, np.int64)
    if m.zero_point:
        zp[:] = unpack_zero_point(p.packing, read(m.zero_point), rows, 1, True).reshape(-1)
    x = w.astype(F32)
    g_recipe = F32(np.max(np.abs(x)) / F32(448))
    g_ok = g_recipe.tobytes() == g_found.tobytes()
    notes = [f"global scale {float(g_found)!r} {'is' if g_ok else 'is not'} amax/448 in float32 "
             f"({float(g_recipe)!r}); the FP8 stage is recomputed with the stored one"]
    cands = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q32 = (x / g_found).astype(F32)
        for fname, y in (("bfloat16", q32.astype(BF16).astype(F32)), ("float32", q32)):
            x8 = np.asarray(decode(encode(y, "e4m3"), "e4m3", np.float32), F32)
            ramax = np.max(np.abs(x8), axis=1)
            for aname, sc in (("bfloat16", (ramax.astype(BF16).astype(F32) / F32(7.5)).astype(BF16).astype(F32)),
                              ("float32", (ramax / F32(7.5)).astype(F32))):
                sc = sc.astype(raw.dtype).astype(F32)
                for cname, yy in (("float32", (x8 / s_found[:, None]).astype(F32)),
                                  ("bfloat16", (x8 / s_found[:, None]).astype(F32).astype(BF16).astype(F32))):
                    c = np.where(s_found[:, None] == 0, 0, np.clip(np.rint(yy) + zp[:, None], -8, 7))
                    label = (f"x8 e4m3(x / g in {fname}); scale amax(x8)/7.5 in {aname}; "
                             f"codes rint(x8 / s) in {cname}") + ("" if g_ok else " (global scale differs)")
                    cands[label] = (sc.view(np.uint32), c.astype(np.int64))

    by, best, miss, misses = _compare(s_found.view(np.uint32), q, cands, lambda b: [b, 0],
                                      lambda k: repr(float(np.uint32(k).view(F32))))
    return TensorExplanation(m.codes, p.name, rows, by, best, int(np.count_nonzero(miss)), misses, notes)


def _explain_nvfp4(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    packed = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    per = m.producer.block[1] if m.producer.block else packed.size * 2 // max(scales.size, 1)
    codes = _fp4_codes(packed).reshape(scales.size, per)
    assert m.global_scale is not None and m.producer.global_direction is not None
    g_found = read(m.global_scale).astype(F32).reshape(-1)[0]
    x = w.astype(F32)
    cands = {}
    notes = []
    amax = F32(np.max(np.abs(x)))
    for recipe in nvfp4.RECIPES if per == 16 else ():  # fmtsim's NVFP4 recipes are 16 per scale
        q = nvfp4.quantize(x, recipe=recipe)
        stored = {"1/G": nvfp4.global_scale_to_stored(float(q.global_scale), m.producer.global_direction)}
        if m.producer.global_direction == "divisor":
            stored["2688/amax"] = F32(F32(2688.0) / amax)
        gmatch = [k for k, v in stored.items() if np.float32(v).tobytes() == g_found.tobytes()]
        label = f"nvfp4 {recipe}"
        if gmatch:
            notes.append(f"{label}: global scale stored as {gmatch[0] if len(stored) > 1 else 'G'} matches "
                         f"({float(g_found)!r})")
        else:
            notes.append(f"{label}: global scale {float(g_found)!r} is not the recipe's "
                         f"({', '.join(f'{k} = {float(v)!r}' for k, v in stored.items())})")
            label += " (global scale differs)"
        cands[label] = (np.asarray(q.scales, np.uint8).reshape(-1), q.codes.reshape(-1, 16))
    cands.update(_nvfp4_stored_global(x, per, F32(g_found), m.producer.global_direction))
    groups = scales.size // max(1, x.shape[0])

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)),
                             misses, notes)


def _nvfp4_stored_global(x: np.ndarray, per: int, g: np.float32, direction: str
                         ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """NVFP4 from the global scale as stored (one scale may serve fused projections: gate/up, q/k/v):
    block scale e4m3(amax / 6 / g) (a multiplier g: ModelOpt, Quark) or e4m3(amax / 6 * G) (a divisor
    G: compressed-tensors, which stores G rounded to bfloat16), amax / 6 in float32 or bfloat16;
    elements e2m1(x / (s * g)), e2m1(x / (s / G)) or e2m1(x * G / s), all float32 steps."""
    xb = x.astype(F32).reshape(-1, per)
    amax = np.max(np.abs(xb), axis=1)
    cands = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for aname, a6 in (("float32", (amax / F32(6)).astype(F32)),
                          ("bfloat16", (amax.astype(BF16).astype(F32) / F32(6)).astype(BF16).astype(F32))):
            sv = (a6 / g if direction == "multiplier" else a6 * g).astype(F32)
            sc = np.asarray(encode(sv, "e4m3"), np.uint8)
            sval = np.asarray(decode(sc, "e4m3", np.float32), F32)[:, None]
            ys: dict[str, np.ndarray]
            if direction == "multiplier":
                ys = {"x / (s * g)": xb / (sval * g).astype(F32)}
            else:
                ys = {"x / (s / G)": xb / (sval / g).astype(F32), "x * G / s": (xb * g).astype(F32) / sval}
            for yname, y in ys.items():
                # a block scale of 0 (an all-zero block, or one that underflows UE4M3) makes x / 0 NaN: code 0
                y = np.where(sval == 0, F32(0), y).astype(F32)
                c = np.where(sval == 0, 0, np.asarray(encode(y, "e2m1"), np.uint8)).astype(np.uint8)
                label = f"nvfp4 stored global scale, amax/6 in {aname}, elements {yname}"
                cands[label] = (sc, c)
                cands[label + ", no -0"] = (sc, _no_neg_zero(c, 0x8))
        if direction == "multiplier":
            cands[MODELOPT_NVFP4] = _nvfp4_one_division(xb, amax, g, "modelopt")
            cands[QUARK_NVFP4] = _nvfp4_one_division(xb, amax, g, "quark")
    return cands


MODELOPT_NVFP4 = ("nvfp4 ModelOpt: scale s e4m3(clamp(amax / (6 * g), 2^-9, 448)), 1.0 for a zero amax; "
                  "elements e2m1(x / (s * g)), sign bit from x < 0")
QUARK_NVFP4 = ("nvfp4 Quark: scale s e4m3(amax / (g * 6)), 1.0 where that code is 0; elements e2m1(x / (s * g)), "
               "no -0")


def _nvfp4_one_division(xb: np.ndarray, amax: np.ndarray, g: np.float32, producer: str
                        ) -> tuple[np.ndarray, np.ndarray]:
    """NVFP4 with a multiplier global scale g as ModelOpt 0.47 and Quark 0.13 write it: the block scale
    is amax / (6 * g), one float32 division by the float32 product (not amax / 6 / g: the two round to
    different UE4M3 codes when the quotient lies near a rounding midpoint, as it does for some blocks
    of the projections that share one global scale), and the elements x / (float32(s) * g).

    ``producer`` "modelopt" (``torch/quantization/qtensor/nvfp4_tensor.py``,
    ``NVFP4QTensor.get_weights_scaling_factor``, ``_cast_per_block_scale_to_fp8``, ``quantize``): a zero
    quotient (an all-zero block) becomes 1.0 and the quotient is clamped to [2^-9, 448] before the FP8
    cast, so a block scale below UE4M3's smallest subnormal is written as 2^-9; ``_cast_fp4`` rounds to
    nearest even and takes the sign bit from ``x < 0``, so a -0 weight is written as +0 (a negative value
    that rounds to 0 keeps its sign). "quark" (``torch/quantization/post_calibration.py``,
    ``realign_single_sequential_quantizer``): the quotient is cast to FP8 first and a code 0 (an all-zero
    block, or one that underflows) is replaced by 1.0; Quark writes no -0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sv = (amax / (F32(6) * g).astype(F32)).astype(F32)
        if producer == "modelopt":
            sv = np.clip(np.where(sv == 0, F32(1), sv), F32(2.0 ** -9), F32(448)).astype(F32)
        sc = np.asarray(encode(sv, "e4m3"), np.uint8)
        if producer == "quark":
            sc = np.where(sc == 0, np.uint8(0x38), sc).astype(np.uint8)
        sval = np.asarray(decode(sc, "e4m3", np.float32), F32)[:, None]
        y = (xb / (sval * g).astype(F32)).astype(F32)
        c = np.asarray(encode(y, "e2m1"), np.uint8)
    if producer == "quark":
        return sc, _no_neg_zero(c, 0x8)
    return sc, np.where(np.signbit(y) & (y == 0), c & 0x7, c).astype(np.uint8)


def _bf16_preimage(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest float32 that round (to nearest even) to each positive bfloat16 ``p``."""
    b = p.astype(F32).view(np.uint32).astype(np.int64)
    even = ((b >> 16) & 1) == 0  # a tie goes to the even neighbour: both ends are p's when p is even
    half = np.where(even, 0x8000, 0x7FFF)
    return (b - half).astype(np.uint32).view(F32), (b + half).astype(np.uint32).view(F32)


def _pre_scale_bound(w: np.ndarray, pre: np.ndarray, qb: np.ndarray, sb: np.ndarray, zb: np.ndarray,
                     shape: tuple[int, int, int, int], qmin: int, qmax: int) -> tuple[np.ndarray, str]:
    """Blocks consistent with ModelOpt's smoothing for SOME float32 scale that rounds to the stored
    bfloat16 pre_quant_scale p (``model_calib.apply_pre_quant_scale_and_smooth``: the weight becomes
    bfloat16(w * float32(1 / s)) with s in float32, and only bfloat16(s) is written; SmoothQuant's s is
    1 / the calibration activations' amax, AWQ's a searched one, neither stored). Every step is monotone
    in s, so over the interval of s the code of each element spans the codes of its two ends and the
    block's amax / qmax scale the range of the ends' amaxes: the block passes when its stored scale and
    every code lie in those ranges. A bound, not a reproduction."""
    rows, cols, ng, group = shape
    lo, hi = _bf16_preimage(np.asarray(pre).reshape(1, -1))
    width = ng * group
    ends = []
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for s in (lo, hi):
            e = (w.astype(F32) * (F32(1) / s)).astype(F32).astype(BF16).astype(F32)
            ends.append(np.pad(e, ((0, 0), (0, width - cols))).reshape(rows * ng, group))
        cs = [np.where(sb[:, None] == 0, 0, np.clip(np.rint(e / sb[:, None]) + zb[:, None], qmin, qmax))
              for e in ends]
        a_lo = np.max(np.minimum(np.abs(ends[0]), np.abs(ends[1])), axis=1)
        a_hi = np.max(np.maximum(np.abs(ends[0]), np.abs(ends[1])), axis=1)
        s_lo, s_hi = (a_lo / F32(qmax)).astype(F32), (a_hi / F32(qmax)).astype(F32)
    c_lo, c_hi = np.minimum(*cs), np.maximum(*cs)
    ok = (sb >= s_lo) & (sb <= s_hi) & np.all((qb >= c_lo) & (qb <= c_hi), axis=1)
    open_codes = int(np.count_nonzero((c_lo != c_hi).reshape(rows, width)[:, :cols]))
    note = (f"pre_quant_scale bound: {rows * cols - open_codes} of {rows * cols} codes and "
            f"{int(np.count_nonzero(s_lo == s_hi))} of {sb.size} scales are fixed by the bound, the rest may "
            "take either end's value; ModelOpt divides the weight by the float32 smoothing scale and writes it "
            "rounded to bfloat16, so the bytes cannot be reproduced from the checkpoint and the original")
    return ok, note


def _explain_int(m: LayerMatch, tj: Any, read: Any, w: np.ndarray, folded: str | None = None
                 ) -> TensorExplanation:
    """int8 / int4: scale amax / qmax (per row or per group; in float32 or bfloat16, stored in the scale's
    dtype), codes round-half-even(x / s) clamped (torch.round), given the stored scale. With a
    pre_quant_scale, also the bound of :func:`_pre_scale_bound`; ``folded``: why a layer whose
    record has one has none (folded elsewhere by the export), said in the notes."""
    from .intcodes import unpack_codes, unpack_zero_point

    p = m.producer
    q = unpack_codes(p.packing, read(m.codes), p.element != "uint4", cols=tj.out_shape[1])
    raw = read(m.scale)
    rows, cols = q.shape
    if tj.block is not None:
        group = tj.block[1]
    else:  # compressed-tensors: [out, groups]
        g = raw.shape[-1] if raw.ndim == 2 and raw.shape[0] == rows else 1
        group = -(-cols // g)
    s = raw.astype(F32)
    per_tensor = s.size == 1
    if per_tensor:
        s = s.reshape(1, 1)
    else:
        s = s.T if p.packing == "int4x8-reorder-t" and s.size > rows else s
        s = s.reshape(rows, -1)
    ng = s.shape[1]
    signed = p.element != "uint4"
    qmax, qmin = {"int8": (127, -128), "int4": (7, -8), "uint4": (15, 0)}[p.element]
    zp = np.zeros((1, 1) if per_tensor else (rows, ng), np.int64)
    if m.zero_point:
        zp = unpack_zero_point(p.packing, read(m.zero_point), rows, ng, signed)
        zp = zp[:1, :1] if per_tensor else zp
    weights = {"w": w.astype(F32)}
    notes = []
    if m.pre_scale:  # SmoothQuant / AWQ: the input is multiplied by pre, so the weight was divided by it
        pre = np.asarray(read(m.pre_scale)).astype(F32).reshape(1, -1)
        weights = {"w / pre_quant_scale": (w.astype(F32) / pre).astype(F32),
                   "bfloat16(w / pre_quant_scale)": (w.astype(F32) / pre).astype(BF16).astype(F32),
                   "w * bfloat16(1 / pre_quant_scale)": (w.astype(F32) * (F32(1) / pre).astype(BF16).astype(F32)
                                                         ).astype(F32)}
        notes.append("weights divided by pre_quant_scale (the input's multiplier) before quantizing")
    if per_tensor:
        sb = s.reshape(1)
        zb = zp.reshape(1)
        qb = q.reshape(1, -1)
        blocks = {k: v.reshape(1, -1) for k, v in weights.items()}
        n_rows = 1
    else:
        width = ng * group
        qb = np.pad(q, ((0, 0), (0, width - cols))).reshape(rows * ng, group)
        sb = s.reshape(-1)
        zb = zp.reshape(-1)
        blocks = {k: np.pad(v, ((0, 0), (0, width - cols))).reshape(rows * ng, group) for k, v in weights.items()}
        n_rows = rows
    cands = {}
    sdt = raw.dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        for wname, xb in blocks.items():
            hi = np.max(xb, axis=1)
            lo = np.min(xb, axis=1)
            amax = np.max(np.abs(xb), axis=1)
            spans = {f"amax/{d:g}": (amax, F32(d)) for d in sorted({qmax, qmax + 1, (qmax - qmin) / 2})}
            span = ((np.maximum(hi, 0) - np.minimum(lo, 0)).astype(F32), F32(qmax - qmin))
            if not signed:
                spans = {f"(max - min)/{qmax - qmin}": span}
            elif m.zero_point:  # asymmetric int4 (compressed-tensors W4A16_ASYM)
                spans[f"(max - min)/{qmax - qmin}"] = span
            for spname, (num, d) in spans.items():
                for aname, sc in (("float32", (num / d).astype(F32)),
                                  ("bfloat16", (num.astype(BF16).astype(F32) / d).astype(BF16).astype(F32))):
                    sc = sc.astype(sdt).astype(F32)
                    for qname, y in (("float32", xb / sb[:, None]),
                                     ("bfloat16", (xb / sb[:, None]).astype(F32).astype(BF16).astype(F32)),
                                     ("float32 x * (1 / s)", xb * (F32(1) / sb[:, None]).astype(F32))):
                        c = np.clip(np.rint(y) + zb[:, None], qmin, qmax)
                        if m.zero_point and qname == "bfloat16":  # the zero point added in bfloat16 too
                            yz = (y + zb[:, None]).astype(F32).astype(BF16).astype(F32)
                            cz = np.where(sb[:, None] == 0, 0, np.clip(np.rint(yz), qmin, qmax)).astype(np.int64)
                            cands[f"scale {spname} in {aname}, codes rint(x / s + zp) in bfloat16"
                                  + (f", {wname}" if len(blocks) > 1 else "")] = (sc.view(np.uint32), cz)
                        c = np.where(sb[:, None] == 0, 0, c).astype(np.int64)
                        label = f"scale {spname} in {aname}, codes rint(x / s){' + zp' if m.zero_point else ''} " \
                                f"in {qname}" + (f", {wname}" if len(blocks) > 1 else "")
                        cands[label] = (sc.view(np.uint32), c)

    def coords(b: int) -> list[int]:
        return [b // ng, b % ng] if n_rows > 1 else [0, 0]

    bounds = {}
    if m.pre_scale and not per_tensor:
        label = (f"scale amax/{qmax}, codes rint(x / s), x is bfloat16(w * float32(1 / p)) for a float32 p that "
                 "rounds to the stored bfloat16 pre_quant_scale (a bound)")
        bounds[label], note = _pre_scale_bound(w, read(m.pre_scale), qb, sb.astype(F32), zb, (rows, cols, ng, group),
                                               qmin, qmax)
        notes.append(note)
    if folded:
        notes.append(folded)
    by, best, miss, misses = _compare(sb.astype(F32).view(np.uint32), qb, cands, coords,
                                      lambda k: repr(float(np.uint32(k).view(F32))), bounds)
    return TensorExplanation(m.codes, p.name, int(sb.size), by, best, int(np.count_nonzero(miss)), misses, notes)


FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def _folded_pre_scale(m: LayerMatch, configs: dict[str, Any]) -> str | None:
    """Why a ModelOpt AWQ layer has no pre_quant_scale although the config says the checkpoint uses them:
    the export averaged the scales of layers that share an input (q/k/v, gate/up), re-smoothed their
    weights to the average and folded it into the preceding norm (``torch/export/quant_utils.py``
    ``preprocess_linear_fusion``, ``_update_pre_quant_scale``, ``fuse_prequant_layernorm``). The layer's
    own searched scale is in no tensor, so nothing ties these bytes to the original weights."""
    hq = configs.get("hf_quant_config.json")
    q = hq.get("quantization") if isinstance(hq, dict) else None
    if not m.producer.pre_scale or m.pre_scale or not (isinstance(q, dict) and q.get("pre_quant_scale") is True):
        return None
    return ("the config says pre_quant_scale, this layer has none: ModelOpt's export folded the average of the "
            "fused layers' AWQ scales into the preceding norm and re-smoothed the weight; the layer's own scale "
            "is not stored, so its blocks cannot be checked against the original (listed, not explained)")


def _fused_amax(target: str, orig: Any) -> float | None:
    """The largest |w| over the projections fused with ``target`` (q/k/v, gate/up), or None."""
    for group in FUSED:
        for name in group:
            if f".{name}." in target:
                sib = [target.replace(f".{name}.", f".{o}.") for o in group]
                if all(t in orig for t in sib):
                    return float(max(np.max(np.abs(np.asarray(orig[t]).astype(F32))) for t in sib))
    return None


def explain(quant: str | Path, original: str | Path, producer: str | None = None) -> list[TensorExplanation]:
    """Name the recipe of every quantized tensor of ``quant`` against ``original``; see the module docstring."""
    check_path(quant, "explain: quant")
    check_path(original, "explain: original")
    read, layers, (entries, configs) = _reader(quant, producer)
    orig = load(original)
    out: list[TensorExplanation] = []
    if not layers:
        raise CheckpointError(f"{quant}: no tensor matches a known producer layout")
    if not any(_out_name(m) in orig for m in layers.values()):
        first = _out_name(layers[min(layers)])
        raise CheckpointError(f"{original}: holds none of the {len(layers)} quantized tensors of {quant} (no "
                              f"{first!r}, ...): not its original; nothing was compared")
    for name, m in sorted(layers.items()):
        tj = layer_plan(m, entries, configs, read)
        target = _out_name(m)
        if target not in orig:
            out.append(TensorExplanation(name, m.producer.name, 0, {}, "-", 0,
                                         notes=[f"no tensor {target!r} in the original"]))
            continue
        w = np.asarray(orig[target]).astype(np.float32)
        if tuple(w.shape) != tuple(tj.out_shape):
            raise CheckpointError(f"{target}: original is {list(w.shape)}, the quantized tensor holds "
                                  f"{list(tj.out_shape)}")
        if m.producer.scheme == "fp8" and m.producer.scale_format == "float":
            out.append(_explain_fp8(m, tj, read, w, _fused_amax(target, orig)))
        elif m.producer.scheme == "fp8" and m.producer.scale_format == "e8m0":
            out.append(_explain_mxfp8(m, tj, read, w))
        elif m.producer.scheme in ("w4a16", "int8") and m.global_scale:  # Quark int4_fp8: two levels
            out.append(_explain_int4_fp8(m, tj, read, w))
        elif m.producer.scheme in ("int8", "w4a16", "w8a16"):
            out.append(_explain_int(m, tj, read, w, _folded_pre_scale(m, configs)))
        elif m.producer.scheme == "mxfp6":  # Quark MXFP6
            out.append(_explain_mxfp6(m, read, w))
        elif m.producer.scale_format == "ue5m3" and not m.global_scale:  # Quark amdfp4
            out.append(_explain_amdfp4(m, read, w))
        elif m.producer.scale_format == "ue5m3":  # Quark amdfp4_global: its scales are lost (producers.py)
            out.append(TensorExplanation(name, m.producer.name, 0, {}, "-", 0, notes=[
                "Quark amdfp4_global: the file keeps each block scale modulo 256 (a float -> uint8 cast), so "
                "nothing can be compared"]))
        elif m.producer.scheme == "mxfp4":
            out.append(_explain_mxfp4(m, read, w))
        elif m.producer.scheme == "nvfp4":
            out.append(_explain_nvfp4(m, read, w))
        elif m.producer.scheme in ("bnb4", "bnb8"):
            out.append(TensorExplanation(name, m.producer.name, 0, {}, "-", 0, notes=[
                "bitsandbytes' quantizer (absmax per block, the nearest of the code values) is not modelled "
                "yet: the values are read exactly (dequantize), the recipe is not named"]))
        else:
            out.append(TensorExplanation(name, m.producer.name, 0, {}, "-", 0,
                                         notes=[f"{m.producer.scheme}: no recipe model yet"]))
    return out


def _bnb4_absmax(m: LayerMatch, read: Any, entries: dict[str, Any]) -> np.ndarray:
    from .bnb import bnb4_absmax, bnb4_state

    _, state = bnb4_state(m.layer, entries, read)
    nested = m.layer + ".weight.nested_quant_map"
    return bnb4_absmax(state, read(m.scale), read(nested) if nested in entries else None,
                       read(m.layer + ".weight.nested_absmax") if nested in entries else None)


@dataclass
class TensorDiff:
    tensor: str
    scale_format: str
    scales: int
    scales_differ: int
    steps: dict[int, int]  # scale step difference (B - A) -> count; float scales: log2 ratio rounded
    codes: int
    codes_differ: int
    first_code_diff: list[int] | None = None
    recipes: dict[str, str] = field(default_factory=dict)  # 'A' / 'B' -> best recipe (with original)
    compared_as: str = ""  # how two element formats were put side by side (OCP against FNUZ)


def _as_fnuz(codes: np.ndarray, scale: np.ndarray, ocp: str, scale_format: str) -> tuple[np.ndarray, np.ndarray]:
    """OCP FP8 codes and their scales as ``fmtsim fnuz convert`` writes them (fmtsim.fnuz: -0 -> +0, NaN ->
    0x80, every scale doubled: a float scale x2 exactly, an E8M0 code + 1), so an OCP checkpoint and an FNUZ
    one compare code for code."""
    lut = ocp_to_fnuz(np.arange(256, dtype=np.uint8), ocp, inf="nan")[0]
    if scale_format == "e8m0":
        k = scale.view(np.uint8)
        return lut[codes.view(np.uint8)], np.where(k < 0xFE, k + 1, 0xFF).astype(np.uint8)
    return lut[codes.view(np.uint8)], scale.astype(np.float64) * 2.0


def diff(a: str | Path, b: str | Path, original: str | Path | None = None,
         producer: str | None = None) -> list[TensorDiff]:
    """Compare two quantized checkpoints of the same weights tensor by tensor."""
    check_path(a, "diff: a")
    check_path(b, "diff: b")
    check_path(original, "diff: original", optional=True)
    read_a, by_codes_a, (entries_a, _) = _reader(a, producer)
    read_b, by_codes_b, (entries_b, _) = _reader(b, producer)
    # tensors are matched by the name dequantization gives them, so two producers' layouts compare
    layers_a = {_out_name(m): m for m in by_codes_a.values()}
    layers_b = {_out_name(m): m for m in by_codes_b.values()}
    common = sorted(set(layers_a) & set(layers_b))
    if not common:
        raise CheckpointError(f"{a} and {b} share no quantized tensor name")
    rec_a = {_out_name(by_codes_a[e.tensor]): e.best for e in explain(a, original, producer)} if original else {}
    rec_b = {_out_name(by_codes_b[e.tensor]): e.best for e in explain(b, original, producer)} if original else {}
    out = []
    for name in common:
        ma, mb = layers_a[name], layers_b[name]
        sa, sb = read_a(ma.scale), read_b(mb.scale)
        ca, cb = read_a(ma.codes), read_b(mb.codes)
        if ma.producer.scheme == "bnb4" == mb.producer.scheme:  # absmax as values: double quantization undone
            sa, sb = _bnb4_absmax(ma, read_a, entries_a), _bnb4_absmax(mb, read_b, entries_b)
        if ma.producer.scheme != mb.producer.scheme:
            raise CheckpointError(f"{name}: {ma.producer.scheme} in {a}, {mb.producer.scheme} in {b}")
        compared_as = ""
        if ma.element != mb.element and {ma.element, mb.element} in ({o, f} for o, f in PAIRS.items()):
            ocp = ma.element if ma.element in PAIRS else mb.element
            side = "A" if ma.element == ocp else "B"
            if side == "A":
                ca, sa = _as_fnuz(ca, sa, ocp, ma.producer.scale_format)
            else:
                cb, sb = _as_fnuz(cb, sb, ocp, mb.producer.scale_format)
            compared_as = (f"{side} ({ocp}) compared as {PAIRS[ocp]}: its codes as 'fmtsim fnuz convert' maps them "
                           "(-0 -> +0), its scales doubled")
        elif ma.element != mb.element:
            raise CheckpointError(f"{name}: element formats differ ({ma.element} in {a}, {mb.element} in {b})")
        if sa.shape != sb.shape or ca.shape != cb.shape:
            raise CheckpointError(f"{name}: shapes differ (codes {list(ca.shape)} vs {list(cb.shape)}, scales "
                                  f"{list(sa.shape)} vs {list(sb.shape)})")
        fmt = ma.producer.scale_format
        if fmt in ("e8m0", "ue4m3"):
            ka, kb = sa.view(np.uint8).astype(np.int64), sb.view(np.uint8).astype(np.int64)
            steps = kb - ka
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = sb.astype(np.float64) / sa.astype(np.float64)
                steps = np.where(sb.astype(np.float64) == sa.astype(np.float64), 0,
                                 np.nan_to_num(np.round(np.log2(np.abs(ratio)) * 8), nan=999))
            steps = steps.astype(np.int64)
        differ = (sa.astype(np.float64).tobytes() != sb.astype(np.float64).tobytes()) if compared_as else \
            (sa.tobytes() != sb.tobytes())
        n_diff = int(np.count_nonzero(sa.astype(np.float64) != sb.astype(np.float64))) if differ else 0
        vals, counts = np.unique(steps[steps != 0], return_counts=True)
        if ma.producer.scheme in ("nvfp4", "mxfp4"):
            xa, xb = _fp4_codes(ca.view(np.uint8)), _fp4_codes(cb.view(np.uint8))
        else:
            xa, xb = ca.view(np.uint8), cb.view(np.uint8)
        dc = xa != xb
        first = [int(i) for i in np.argwhere(dc)[0]] if dc.any() else None
        recipes = {}
        if original:
            recipes = {"A": rec_a.get(name, "-"), "B": rec_b.get(name, "-")}
        out.append(TensorDiff(name, fmt if fmt != "float" else str(sa.dtype), int(sa.size), n_diff,
                              {int(v): int(c) for v, c in zip(vals, counts, strict=True)}, int(xa.size),
                              int(np.count_nonzero(dc)), first, recipes, compared_as))
    return out
