"""``fmtsim checkpoint explain`` and ``fmtsim checkpoint diff``: which recipe made a quantized
checkpoint, block by block, and how two quantizations of the same weights differ.

explain QUANT --original ORIG: every quantized tensor of QUANT (producer records, as dequantize
names them) is re-quantized from ORIG's tensor of the same output name with each fmtsim recipe,
and the bytes compared block by block:

    fp8    scale  amax/448 (a float32 division, DeepSeek / ModelOpt / compressed-tensors), or a
                  power of two by each E8M0 rule (floor / ceil / even / rceil)
           codes  RNE, saturating, of x / s ("divide") or of x * fl(1/s) ("reciprocal")
    mxfp4  fmtsim.mx.quantize(scale_rule = floor / ceil / even / rceil), RNE elements
    nvfp4  fmtsim.nvfp4.quantize(recipe = te / torchao), the global scale in the producer's
           convention (multiplier or divisor, stored as fl(1/G) or as fl(2688/amax))

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

import numpy as np

from .. import mx, nvfp4
from ..codec import encode
from .dequant import FP8_ELEMENT, _out_name, _scan, layer_plan
from .files import CheckpointError, Header, load, read_array
from .producers import LayerMatch

__all__ = ["explain", "diff", "TensorExplanation", "BlockMiss", "TensorDiff"]

F32 = np.float32
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
             coords: Any, fmt_scale: Any) -> tuple[dict[str, int], str, np.ndarray, list[BlockMiss]]:
    """found_s [B] scale keys, found_c [B, n] codes; cands recipe -> (scale keys [B], codes [B, n])."""
    ok = {r: (s == found_s) & np.all(c == found_c, axis=1) for r, (s, c) in cands.items()}
    by = {r: int(np.count_nonzero(v)) for r, v in ok.items()}
    top = max(by.values()) if by else 0
    tied = [r for r in by if by[r] == top]
    best = " = ".join(tied) if by and top else (tied[0] if by else "-")
    any_ok = np.zeros(found_s.shape[0], bool)
    for v in ok.values():
        any_ok |= v
    misses = []
    if best != "-":
        es, ec = cands[tied[0]]
        for b in np.flatnonzero(~any_ok)[:10]:
            diff = np.flatnonzero(ec[b] != found_c[b])
            i = int(diff[0]) if diff.size else None
            misses.append(BlockMiss(coords(int(b)), tied[0], fmt_scale(es[b]), fmt_scale(found_s[b]), i,
                                    int(ec[b, i]) if i is not None else None,
                                    int(found_c[b, i]) if i is not None else None))
    return by, best, ~any_ok, misses


def _explain_fp8(m: LayerMatch, tj: Any, read: Any, w: np.ndarray) -> TensorExplanation:
    codes = read(m.codes).view(np.uint8)
    s_raw = read(m.scale)
    s = s_raw.astype(F32)
    sdt = s_raw.dtype
    element = FP8_ELEMENT[tj.codes_dtype]
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
    fmax = F32(448.0) if element.startswith("e4m3") else F32(57344.0)
    stored = s.reshape(-1).astype(F32)
    # candidates are rounded to the scale's stored dtype (BF16 scales are common), then compared in float32
    scale_cands = {"amax/max": (amax / fmax).astype(F32).astype(sdt).astype(F32)}
    elem_name = "e4m3" if element.startswith("e4m3") else "e5m2"
    for rule in MX_RULES:
        p2 = np.exp2(mx.scale_codes(amax, elem_name, rule).astype(np.float64) - 127)
        scale_cands[f"pow2-{rule}"] = p2.astype(F32)
    cands = {}
    sfull = stored[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        div = np.where(valid, np.asarray(encode((wb / sfull).astype(F32), element)), 0).astype(np.uint8)
        mul = np.where(valid, np.asarray(encode((wb * (F32(1) / sfull).astype(F32)).astype(F32), element)), 0
                       ).astype(np.uint8)
    for sname, sc in scale_cands.items():
        for ename, c in (("divide", div), ("reciprocal", mul)):
            cands[f"scale {sname}, codes {ename}"] = (sc.view(np.uint32), c)

    def coords(b: int) -> list[int]:
        return [b // ncb, b % ncb]

    by, best, miss, misses = _compare(stored.view(np.uint32), np.where(valid, cb, 0).astype(np.uint8), cands, coords,
                                      lambda k: repr(float(np.uint32(k).view(F32))))
    return TensorExplanation(m.codes, m.producer.name, int(stored.size), by, best, int(np.count_nonzero(miss)), misses)


def _explain_mxfp4(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    packed = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    codes = _fp4_codes(packed).reshape(scales.size, 32)
    x = w.astype(F32).reshape(-1, w.shape[-1])
    cands = {}
    for rule in MX_RULES:
        q = mx.quantize(x, "mxfp4", axis=-1, block_size=32, scale_rule=rule)
        cands[f"mx scale {rule}, RNE"] = (np.asarray(q.scales, np.uint8).reshape(-1), q.codes.reshape(-1, 32))
    groups = scales.size // x.shape[0] if x.shape[0] else 1

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)), misses)


def _explain_nvfp4(m: LayerMatch, read: Any, w: np.ndarray) -> TensorExplanation:
    packed = read(m.codes).view(np.uint8)
    scales = read(m.scale).view(np.uint8).reshape(-1)
    codes = _fp4_codes(packed).reshape(scales.size, 16)
    assert m.global_scale is not None and m.producer.global_direction is not None
    g_found = read(m.global_scale).astype(F32).reshape(-1)[0]
    x = w.astype(F32)
    cands = {}
    notes = []
    amax = F32(np.max(np.abs(x)))
    for recipe in nvfp4.RECIPES:
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
    groups = scales.size // max(1, x.shape[0])

    def coords(b: int) -> list[int]:
        return [b // groups, b % groups]

    by, best, miss, misses = _compare(scales, codes, cands, coords, lambda k: f"0x{int(k):02X}")
    return TensorExplanation(m.codes, m.producer.name, int(scales.size), by, best, int(np.count_nonzero(miss)),
                             misses, notes)


def explain(quant: str | Path, original: str | Path, producer: str | None = None) -> list[TensorExplanation]:
    """Name the recipe of every quantized tensor of ``quant`` against ``original``; see the module docstring."""
    read, layers, (entries, configs) = _reader(quant, producer)
    orig = load(original)
    out: list[TensorExplanation] = []
    if not layers:
        raise CheckpointError(f"{quant}: no tensor matches a known producer layout")
    for name, m in sorted(layers.items()):
        tj = layer_plan(m, entries, configs)
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
            out.append(_explain_fp8(m, tj, read, w))
        elif m.producer.scheme == "mxfp4":
            out.append(_explain_mxfp4(m, read, w))
        elif m.producer.scheme == "nvfp4":
            out.append(_explain_nvfp4(m, read, w))
        else:
            out.append(TensorExplanation(name, m.producer.name, 0, {}, "-", 0,
                                         notes=[f"{m.producer.scheme}: no recipe model yet"]))
    if not any(r.blocks for r in out) and all(_out_name(layers[r.tensor]) not in orig for r in out):
        first = _out_name(layers[out[0].tensor])
        raise CheckpointError(f"{original}: holds none of the {len(out)} quantized tensors of {quant} (no "
                              f"{first!r}, ...): not its original; nothing was compared")
    return out


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


def diff(a: str | Path, b: str | Path, original: str | Path | None = None,
         producer: str | None = None) -> list[TensorDiff]:
    """Compare two quantized checkpoints of the same weights tensor by tensor."""
    read_a, by_codes_a, _ = _reader(a, producer)
    read_b, by_codes_b, _ = _reader(b, producer)
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
        if ma.producer.scheme != mb.producer.scheme:
            raise CheckpointError(f"{name}: {ma.producer.scheme} in {a}, {mb.producer.scheme} in {b}")
        if sa.shape != sb.shape or ca.shape != cb.shape or ca.dtype != cb.dtype:
            raise CheckpointError(f"{name}: shapes or dtypes differ ({list(ca.shape)} vs {list(cb.shape)})")
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
            ka, kb = sa.view(np.uint8), sb.view(np.uint8)
        differ = (sa.tobytes() != sb.tobytes())
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
                              int(np.count_nonzero(dc)), first, recipes))
    return out
