"""Which format suits these weights: quantize tensors under scheme specs with fmtsim's own
bit-exact quantizers, optionally after a transform, and measure the error in float64.

Scheme spec grammar (``NAME[:OPTION]...[+TRANSFORM]...``):

    int<b>[:sym|:asym][:tensor|:channel|:group=G]   fmtsim.intq (b in 2..8; default sym, tensor)
    mxfp8|mxfp8_e5m2|mxfp6|mxfp6_e2m3|mxfp4|mxint8[:rule=floor|ceil|even|rceil]   fmtsim.mx
    nvfp4[:recipe=te|torchao][:tile=1x16|16x16]     fmtsim.nvfp4
    <float format>[:tensor|:channel|:block=R[xC]|:group=G]
        any fmtsim float format (e4m3, e5m2, e4m3fnuz, e5m2fnuz, e2m1, e3m2, e2m3, ...) with a
        float32 scale amax / max finite per tensor, per row, per R x C block (block=128: the
        128x128 blocks DeepSeek-V3's FP8 uses) or per G values along the last axis; RNE,
        saturating to max finite

Transforms, applied before quantizing and undone after (errors are in the weights' own domain):

    +clip=pP        clip |w| at its P-th percentile (clip=p99.9)
    +clip=mse       clip at the threshold with the least MSE: 40 fractions of max|w| from 1 down to
                    1/1000 (geometric), then 20 between the best one's neighbours
    +clip=kl        clip where the KL divergence between the histogram of |w| (2048 bins, the tail
                    folded in) and it merged into the format's magnitudes is least (TensorRT's
                    entropy calibration; 256 candidate thresholds)
    +hadamard=B     rotate the last axis by a block-diagonal Walsh-Hadamard of size B (a power of
                    two dividing it), orthonormal, so the rotation itself adds no error
    +hadamard2=B    rotate both sides (rows by B too: H W H^T)
    +signs=SEED     with a rotation: random signs (seeded) on the diagonal first (H D)

Symmetric integer scales are max|x| / (2^(b-1) - 1), codes round half to even (intq's
convention); the seed example [0.12, -0.53, 0.88, -0.07, 0.31, 1.40, -0.95, 0.02] in INT4
gives MSE 0.0042 per tensor and 0.00186 in groups of 4 (tests/test_compare.py).
Channels are rows (axis 0) and groups run along the last axis; a last axis that is not a
multiple of the group is padded with zeros (as kernels pad K; the padding's scales are counted
in the bits per weight, the padding itself is not a weight). Metrics (:func:`metrics`):
MSE, SQNR in dB, relative RMS error, max abs error, the share of nonzero weights that became 0,
the share clipped by a clip transform, kurtosis (Pearson: 3 for a Gaussian) of the weights and
of what the quantizer was given, and bits per weight with the scales' storage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import intq, mx, nvfp4
from ..codec import decode, encode
from ..formats import FORMATS, Format, get_format

__all__ = ["Scheme", "NotApplicable", "parse_scheme", "quantize_dequantize", "evaluate", "metrics", "compare",
           "compare_source", "DEFAULT_SCHEMES", "Totals"]

#: what ``fmtsim compare`` runs when no --schemes are given
DEFAULT_SCHEMES = ("int8", "int8:channel", "int4", "int4:channel", "int4:group=32", "int4:asym:group=128",
                   "e4m3", "e4m3:channel", "e4m3:block=128", "e5m2:channel", "mxfp8", "mxfp6", "mxfp4",
                   "mxfp4:rule=even", "mxfp4:rule=ceil", "nvfp4", "nvfp4:tile=16x16")

_TRANSFORMS = ("clip", "hadamard", "hadamard2", "signs")


@dataclass(frozen=True)
class Scheme:
    spec: str
    family: str  # "int", "mx", "nvfp4" or "float" (a float format with a float32 scale)
    name: str
    options: tuple[tuple[str, str], ...]
    transforms: tuple[tuple[str, str], ...] = ()  # (name, value) in the order given

    def option(self, key: str, default: str) -> str:
        return dict(self.options).get(key, default)


class NotApplicable(ValueError):
    """The scheme cannot take this tensor's shape (a rotation block, 2-D blocks on a vector):
    ``fmtsim compare`` lists the scheme as not ranked rather than failing the run."""


_MX_RULES = ("floor", "ceil", "even", "rceil")
_NVFP4_RECIPES = ("te", "torchao")
_NVFP4_TILES = ("1x16", "16x16")
_INT_NAME = re.compile(r"int([2-8])")


def parse_scheme(spec: str) -> Scheme:
    """A Scheme from a spec string (module docstring); ValueError names the bad part. Every
    option is checked against the values it takes, and an option or transform given twice, or
    two that contradict each other (``:group=32:channel``), is refused."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"scheme spec must be a non-empty string, not {spec!r}")
    if spec != spec.strip() or " " in spec:
        raise ValueError(f"scheme {spec!r}: no spaces in a spec")
    head, *plus = spec.lower().split("+")
    transforms = tuple(_parse_transform(spec, t) for t in plus)
    kinds = [k if not k.startswith("hadamard") else "hadamard" for k, _ in transforms]
    for k in set(kinds):
        if kinds.count(k) > 1:
            raise ValueError(f"scheme {spec!r}: +{k} given twice (one {'rotation' if k == 'hadamard' else k} a scheme)")
    if "signs" in kinds and "hadamard" not in kinds:
        raise ValueError(f"scheme {spec!r}: +signs applies to a rotation (+hadamard=B or +hadamard2=B)")
    name, *parts = head.split(":")
    opts: dict[str, str] = {}
    for p in parts:
        key, eq, val = p.partition("=")
        if not eq:
            if p in ("sym", "asym"):
                key, val = "mode", p
            elif p in ("tensor", "channel"):
                key, val = "granularity", p
            else:
                raise ValueError(f"scheme {spec!r}: unknown option {p!r}")
        elif not val:
            raise ValueError(f"scheme {spec!r}: option {key!r} has no value")
        if key in ("group", "block"):
            if "granularity" in opts:
                raise ValueError(f"scheme {spec!r}: {p!r} contradicts {opts['granularity']!r} (one granularity a "
                                 "scheme)")
            opts["granularity"] = key
        elif key == "granularity" and "granularity" in opts:
            raise ValueError(f"scheme {spec!r}: {p!r} contradicts {opts['granularity']!r} (one granularity a scheme)")
        if key in opts and key != "granularity":
            raise ValueError(f"scheme {spec!r}: option {key!r} given twice")
        opts[key] = val
    if _INT_NAME.fullmatch(name):
        family, allowed = "int", {"mode", "granularity", "group"}
    elif name.startswith("int"):
        raise ValueError(f"scheme {spec!r}: integer schemes are int2 .. int8, not {name!r}")
    elif name in mx.SCHEMES or name in ("mxfp8", "mxfp6"):
        family, allowed = "mx", {"rule"}
    elif name == "nvfp4":
        family, allowed = "nvfp4", {"recipe", "tile"}
    elif name in FORMATS and FORMATS[name].kind == "float" and FORMATS[name].signed:
        family, allowed = "float", {"granularity", "block", "group"}
        name = FORMATS[name].name
    elif name in FORMATS and FORMATS[name].kind == "float":
        raise ValueError(f"scheme {spec!r}: {name} is unsigned (a scale format): it cannot hold signed weights")
    else:
        raise ValueError(f"scheme {spec!r}: unknown name {name!r} (int<b>, an MX scheme, nvfp4, or a float "
                         "format such as e4m3)")
    bad = sorted(set(opts) - allowed - {"granularity"})
    if opts.get("granularity") == "block" and family != "float":
        bad = bad or ["block"]
    if opts.get("granularity") in ("tensor", "channel", "group") and family in ("mx", "nvfp4"):
        bad = bad or [opts["granularity"]]
    if bad:
        raise ValueError(f"scheme {spec!r}: option {bad[0]!r} does not apply to {name}")
    if "group" in opts and not (opts["group"].isdigit() and int(opts["group"]) > 0):
        raise ValueError(f"scheme {spec!r}: group must be a positive whole number, not {opts['group']!r}")
    if "block" in opts:
        _block_shape(spec, opts["block"])
    for key, choices in (("rule", _MX_RULES), ("recipe", _NVFP4_RECIPES), ("tile", _NVFP4_TILES)):
        if key in opts and opts[key] not in choices:
            raise ValueError(f"scheme {spec!r}: {key} must be one of {', '.join(choices)}, not {opts[key]!r}")
    return Scheme(spec, family, name, tuple(sorted(opts.items())), transforms)


def _parse_transform(spec: str, text: str) -> tuple[str, str]:
    key, eq, val = text.partition("=")
    if key not in _TRANSFORMS or not eq or not val:
        raise ValueError(f"scheme {spec!r}: unknown transform {'+' + text!r} (+clip=pP, +clip=mse, +clip=kl, "
                         "+hadamard=B, "
                         "+hadamard2=B, +signs=SEED)")
    if key == "clip" and val not in ("mse", "kl"):
        try:
            p = float(val[1:]) if val.startswith("p") else float("nan")
        except ValueError:
            p = float("nan")
        if not 0 < p <= 100:
            raise ValueError(f"scheme {spec!r}: +clip takes pP (a percentile in (0, 100], e.g. p99.9), mse or kl, "
                             f"not {val!r}")
    if key in ("hadamard", "hadamard2") and not (val.isdigit() and int(val) >= 2 and int(val) & (int(val) - 1) == 0):
        raise ValueError(f"scheme {spec!r}: +{key} takes a power of two >= 2, not {val!r}")
    if key == "signs" and not val.isdigit():
        raise ValueError(f"scheme {spec!r}: +signs takes a seed (a whole number), not {val!r}")
    return key, val


def _block_shape(spec: str, text: str) -> tuple[int, int]:
    r, sep, c = text.partition("x")
    try:
        if not r.isdigit() or (sep and not c.isdigit()):
            raise ValueError
        rows, cols = int(r), int(c if sep else r)
    except ValueError:
        raise ValueError(f"scheme {spec!r}: block must be like 128 or 1x128, not {text!r}") from None
    if rows < 1 or cols < 1:
        raise ValueError(f"scheme {spec!r}: block must be positive, not {text!r}")
    return rows, cols


def _multiple(x: np.ndarray, s: Scheme) -> tuple[int, int]:
    """(rows, columns) the scheme's groups need x's last two axes to be multiples of."""
    if s.family == "int" and s.option("granularity", "tensor") == "group":
        return 1, int(s.option("group", "1"))
    if s.family == "float" and s.option("granularity", "tensor") == "group":
        return 1, int(s.option("group", "1"))
    if s.family == "mx":
        return 1, 32
    if s.family == "nvfp4":
        tile = s.option("tile", "1x16")
        return (16, 16) if tile == "16x16" else (1, 16)
    return 1, 1


def _quantize(x: np.ndarray, s: Scheme) -> tuple[np.ndarray, float]:
    """(x quantized and dequantized under ``s``'s format and scales, in float64; bits per weight).
    A last axis (or, for 16x16 tiles, a row count) that is not a multiple of the scheme's group
    is padded with zeros, as kernels pad K, and the padding dropped again: it is not counted as
    weights, but the scales it needs are."""
    r, c = _multiple(x, s)
    if x.ndim >= 1 and (x.shape[-1] % c or (x.ndim >= 2 and x.shape[-2] % r)):
        pad = [(0, 0)] * x.ndim
        pad[-1] = (0, -x.shape[-1] % c)
        if x.ndim >= 2:
            pad[-2] = (0, -x.shape[-2] % r)
        padded = np.pad(x, pad)
        y, bits = _quantize_exact(padded, s)
        crop = tuple(slice(0, n) for n in x.shape)
        # the padded layout's scale bits, over the real weights, plus each real weight's own bits
        elem = _element_bits(s)
        scale_bits = (bits - elem) * padded.size
        return y[crop], elem + scale_bits / x.size
    return _quantize_exact(x, s)


def _element_format(s: Scheme) -> Format | None:
    """The format of the scheme's elements (None for plain integers: ``int<b>``)."""
    if s.family == "int":
        return None
    if s.family == "nvfp4":
        return get_format("e2m1")
    if s.family == "mx":
        return get_format(mx.SCHEMES[mx._scheme(s.name)])
    return get_format(s.name)


def _element_bits(s: Scheme) -> int:
    f = _element_format(s)
    return int(s.name[3:]) if f is None else f.bits


def _quantize_exact(x: np.ndarray, s: Scheme) -> tuple[np.ndarray, float]:
    n = x.size
    if n == 0:
        raise ValueError("the tensor has no elements")
    if s.family == "nvfp4" and s.option("tile", "1x16") == "16x16" and x.ndim < 2:
        raise NotApplicable(f"scheme {s.spec!r}: 16x16 tiles need a 2-D tensor, not shape {x.shape}")
    if s.family == "int":
        bits = int(s.name[3:])
        sym = s.option("mode", "sym") == "sym"
        gran = s.option("granularity", "tensor")
        group = int(s.option("group", "0")) if gran == "group" else None
        q = intq.quantize(x, bits, symmetric=sym, channel_axis=0 if gran == "channel" else None,
                          group_size=group, axis=-1)
        nscales = int(np.asarray(q.scale).size)
        per_scale = 32 + (0 if sym else bits)  # float32 scale (+ a zero point of b bits)
        return intq.dequantize(q, np.float64), bits + nscales * per_scale / n
    if s.family == "mx":
        qm = mx.quantize(x, s.name, axis=-1, scale_rule=s.option("rule", "floor"))
        return mx.dequantize(qm, np.float64), qm.element_format.bits + 8 * int(np.asarray(qm.scales).size) / n
    if s.family == "float":
        return _float_quantize(x, s)
    tile_text = s.option("tile", "1x16")
    try:
        tile = tuple(int(t) for t in tile_text.split("x"))
    except ValueError:
        raise ValueError(f"scheme {s.spec!r}: tile must be like 1x16 or 16x16, not {tile_text!r}") from None
    qn = nvfp4.quantize(x, tile=tile, recipe=s.option("recipe", "te"))  # type: ignore[arg-type]
    scale_count = n // (tile[0] * tile[1])
    return nvfp4.dequantize(qn, np.float64), 4 + (8 * scale_count + 32) / n


def _float_quantize(x: np.ndarray, s: Scheme) -> tuple[np.ndarray, float]:
    """A float format with a float32 scale amax / max finite per tensor, row, block or group:
    each element rounded once (RNE, saturating) from x / scale, computed in float64."""
    f = get_format(s.name)
    fmax = float(f.max_finite)
    x64 = np.asarray(x, dtype=np.float64)
    gran = s.option("granularity", "tensor")
    if gran == "tensor":
        view = x64.reshape(1, 1, 1, -1)
    elif gran == "channel":
        view = x64.reshape(x64.shape[0] if x64.ndim else 1, 1, 1, -1)
    elif gran == "group":
        g = int(s.option("group", "0"))
        if x64.shape[-1] % g if x64.ndim else True:
            raise ValueError(f"scheme {s.spec!r}: the last axis ({x64.shape[-1] if x64.ndim else 0}) is not a "
                             f"multiple of group {g}")
        view = x64.reshape(-1, 1, 1, g)
    else:
        if x64.ndim != 2:
            raise NotApplicable(f"scheme {s.spec!r}: block scales need a 2-D tensor, not shape {x64.shape}")
        r, c = _block_shape(s.spec, s.option("block", "128"))
        rows, cols = x64.shape
        pad = np.zeros((-(-rows // r) * r, -(-cols // c) * c))
        pad[:rows, :cols] = x64  # partial edge blocks: their own amax (zeros do not raise it)
        view = pad.reshape(pad.shape[0] // r, r, pad.shape[1] // c, c).transpose(0, 2, 1, 3)
        view = view.reshape(view.shape[0], view.shape[1], 1, r * c)
    amax = np.max(np.abs(view), axis=-1, keepdims=True)
    with np.errstate(under="ignore"):
        s32 = np.where(amax > 0, amax / fmax, 1.0).astype(np.float32)  # as producers store it
    # a scale that underflows float32 to 0 (weights near 1e-42) would divide by zero: the
    # smallest float32 instead (the block then saturates, as it would on a device)
    s32 = np.where(s32 == 0, np.float32(2.0**-149), s32)
    scale = s32.astype(np.float64)
    codes = encode(view / scale, f, rounding="rne", overflow="satfinite")
    deq = np.asarray(decode(codes, f, np.float64)) * scale
    if gran == "block":
        r, c = _block_shape(s.spec, s.option("block", "128"))
        big = deq.reshape(pad.shape[0] // r, pad.shape[1] // c, r, c).transpose(0, 2, 1, 3).reshape(pad.shape)
        out = big[:rows, :cols]
    else:
        out = deq.reshape(x64.shape)
    return out, f.bits + 32 * scale.size / max(x64.size, 1)


def _hadamard(b: int) -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < b:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(b)


def _signs(seed: int, n: int, salt: int) -> np.ndarray:
    return np.random.default_rng([seed, salt]).choice(np.array([-1.0, 1.0]), size=n)


def _rotate(x: np.ndarray, b: int, both: bool, seed: int | None, spec: str, inverse: bool) -> np.ndarray:
    """Block-diagonal Walsh-Hadamard on the last axis (and the rows with ``both``), with random
    signs first where a seed is given; ``inverse`` undoes it (H is symmetric and orthonormal)."""
    if x.ndim != 2:
        raise NotApplicable(f"scheme {spec!r}: a rotation needs a 2-D tensor, not shape {x.shape}")
    rows, cols = x.shape
    if cols % b or (both and rows % b):
        raise NotApplicable(f"scheme {spec!r}: shape {x.shape} is not a multiple of the rotation block {b}"
                         + (" on both axes" if both else " on its last axis"))
    h = _hadamard(b)
    dc = _signs(seed, cols, 1) if seed is not None else None
    dr = _signs(seed, rows, 2) if seed is not None and both else None
    y = x
    if not inverse:
        if dc is not None:
            y = y * dc
        if dr is not None:
            y = y * dr[:, None]
    y = (y.reshape(rows, cols // b, b) @ h).reshape(rows, cols)
    if both:
        y = (h @ y.reshape(rows // b, b, cols)).reshape(rows, cols)
    if inverse:
        if dc is not None:
            y = y * dc
        if dr is not None:
            y = y * dr[:, None]
    return y


def _mse_clip(y: np.ndarray, s: Scheme) -> float:
    """The clip threshold with the least MSE of quantizing clip(y) against y (a fixed search:
    the same threshold on every machine)."""
    amax = float(np.max(np.abs(y))) if y.size else 0.0
    if amax == 0:
        return 0.0

    def err(c: float) -> float:
        yh, _ = _quantize(np.clip(y, -c, c), s)
        return float(np.mean((yh - y) ** 2))

    coarse = amax * np.geomspace(1.0, 1e-3, 40)
    errs = [err(float(c)) for c in coarse]
    i = int(np.argmin(errs))
    lo, hi = coarse[min(i + 1, len(coarse) - 1)], coarse[max(i - 1, 0)]
    fine = np.linspace(lo, hi, 20)
    cands = [(errs[i], float(coarse[i]))] + [(err(float(c)), float(c)) for c in fine]
    return min(cands)[1]


def _levels(s: Scheme) -> int:
    """How many magnitudes the scheme's element format has above zero (int b: 2^(b-1) - 1)."""
    f = _element_format(s)
    if f is None:
        return 2 ** (int(s.name[3:]) - 1) - 1
    v = np.asarray(decode(np.arange(f.n_codes), f, np.float64))
    return int(np.count_nonzero(np.isfinite(v) & (v > 0)))


def _kl_clip(y: np.ndarray, s: Scheme, bins: int = 2048) -> float:
    """The clip threshold of least KL divergence between the histogram of |y| up to it (the
    tail folded into the last bin) and that histogram merged into as many levels as the
    format has magnitudes (TensorRT's entropy calibration), over 256 evenly spaced candidates."""
    a = np.abs(y).reshape(-1)
    amax = float(a.max()) if a.size else 0.0
    if amax == 0:
        return 0.0
    hist, edges = np.histogram(a, bins=bins, range=(0.0, amax))
    hist = hist.astype(np.float64)
    levels = min(_levels(s), bins)
    best: tuple[float, float] | None = None
    for i in np.unique(np.linspace(levels, bins, 256).astype(int)):
        p = hist[:i].copy()
        p[-1] += hist[i:].sum()
        nz = hist[:i] > 0
        starts = (np.arange(levels) * i) // levels
        sums = np.add.reduceat(hist[:i], starts)
        counts = np.add.reduceat(nz.astype(np.float64), starts)
        which = np.searchsorted(starts, np.arange(i), side="right") - 1
        q = np.where(nz, (sums / np.maximum(counts, 1))[which], 0.0)
        ps, qs = p.sum(), q.sum()
        if ps == 0 or qs == 0:
            continue
        pn, qn = p / ps, q / qs
        m = pn > 0
        kl = float(np.sum(pn[m] * np.log(pn[m] / np.where(qn[m] > 0, qn[m], 1e-300))))
        if best is None or kl < best[0]:
            best = (kl, float(edges[i]))
    return best[1] if best is not None else amax


def _kurtosis(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    d = x - x.mean() if x.size else x
    var = float(np.mean(d * d)) if x.size else 0.0
    return float(np.mean(d**4) / var**2) if var > 0 else 0.0


def evaluate(w: Any, scheme: Scheme | str) -> dict[str, Any]:
    """One tensor under one scheme: the dequantized tensor (``w_hat``, float64, in the weights'
    own domain), bits per weight, the clip threshold and count, and the kurtosis of the weights
    and of what the quantizer was given."""
    s = parse_scheme(scheme) if isinstance(scheme, str) else scheme
    x = np.asarray(w, dtype=np.float64)
    tr = dict(s.transforms)
    y = x
    rotation = next(((int(v), k == "hadamard2") for k, v in s.transforms if k.startswith("hadamard")), None)
    seed = int(tr["signs"]) if "signs" in tr else None
    if rotation is not None:
        y = _rotate(y, rotation[0], rotation[1], seed, s.spec, inverse=False)
    threshold, clipped = None, 0
    if "clip" in tr:
        a = np.abs(y)
        if tr["clip"] == "mse":
            threshold = _mse_clip(y, s)
        elif tr["clip"] == "kl":
            threshold = _kl_clip(y, s)
        else:
            threshold = float(np.percentile(a, float(tr["clip"][1:]))) if a.size else 0.0
        clipped = int(np.count_nonzero(a > threshold))
        y = np.clip(y, -threshold, threshold)
    y_hat, bpw = _quantize(y, s)
    w_hat = _rotate(y_hat, rotation[0], rotation[1], seed, s.spec, inverse=True) if rotation else y_hat
    return {"w_hat": w_hat, "bits_per_weight": bpw, "clip_threshold": threshold, "clipped_count": clipped,
            "kurtosis": _kurtosis(x), "kurtosis_quantized": _kurtosis(y)}


def quantize_dequantize(w: Any, scheme: Scheme | str) -> tuple[np.ndarray, float]:
    """(the dequantized tensor in float64, bits per weight including scale storage)."""
    r = evaluate(w, scheme)
    return r["w_hat"], r["bits_per_weight"]


def metrics(w: Any, w_hat: np.ndarray) -> dict[str, float]:
    """MSE, SQNR (dB), relative error, max abs error, share of nonzero weights snapped to zero,
    all in float64."""
    t = Totals.of(np.asarray(w, dtype=np.float64), np.asarray(w_hat, dtype=np.float64))
    return t.metrics()


@dataclass
class Totals:
    """Sums over the elements of one or more tensors, from which every metric follows: so the
    overall row of many tensors is the metrics of all their elements together (size-weighted)."""

    n: int = 0
    sse: float = 0.0
    power: float = 0.0
    max_abs: float = 0.0
    nonzero: int = 0
    zeroed: int = 0
    clipped: int = 0
    bits: float = 0.0
    # with activations X: the layer's outputs X W^T against X W_hat^T (0 when none were given)
    out_n: int = 0
    out_sse: float = 0.0
    out_power: float = 0.0

    @classmethod
    def of(cls, x: np.ndarray, x_hat: np.ndarray, bpw: float = 0.0, clipped: int = 0,
           activations: np.ndarray | None = None) -> Totals:
        e = x_hat - x
        nz = x != 0
        t = cls(int(x.size), float(np.sum(e * e)), float(np.sum(x * x)),
                float(np.max(np.abs(e))) if e.size else 0.0, int(np.count_nonzero(nz)),
                int(np.count_nonzero((x_hat == 0) & nz)), clipped, bpw * x.size)
        if activations is not None:
            y = activations @ x.T
            d = activations @ e.T
            t.out_n, t.out_sse, t.out_power = int(y.size), float(np.sum(d * d)), float(np.sum(y * y))
        return t

    def add(self, o: Totals) -> None:
        self.n += o.n
        self.sse += o.sse
        self.power += o.power
        self.max_abs = max(self.max_abs, o.max_abs)
        self.nonzero += o.nonzero
        self.zeroed += o.zeroed
        self.clipped += o.clipped
        self.bits += o.bits
        self.out_n += o.out_n
        self.out_sse += o.out_sse
        self.out_power += o.out_power

    def metrics(self) -> dict[str, float]:
        mse = self.sse / self.n if self.n else 0.0
        return {
            "mse": mse,
            "sqnr_db": float(10 * np.log10(self.power / self.sse)) if self.sse > 0 and self.power > 0
            else (float("inf") if self.sse == 0 else float("nan")),
            "rel_error": float(np.sqrt(self.sse / self.power)) if self.power > 0 else 0.0,
            "max_abs_error": self.max_abs,
            "zeroed": self.zeroed / self.nonzero if self.nonzero else 0.0,
            "clipped": self.clipped / self.n if self.n else 0.0,
            "out_mse": self.out_sse / self.out_n if self.out_n else float("nan"),
            "out_sqnr_db": float(10 * np.log10(self.out_power / self.out_sse)) if self.out_sse > 0 and
            self.out_power > 0 else (float("inf") if self.out_n else float("nan")),
        }


def compare(w: Any, schemes: list[str] | tuple[str, ...] = DEFAULT_SCHEMES) -> list[dict[str, Any]]:
    """One row per scheme for the tensor ``w``: the metrics, bits per weight and kurtosis,
    ranked by MSE (ties by name)."""
    x = np.asarray(w, dtype=np.float64)
    rows = []
    for spec in schemes:
        r = evaluate(x, spec)
        t = Totals.of(x, r["w_hat"], r["bits_per_weight"], r["clipped_count"])
        rows.append({"scheme": spec, "bits_per_weight": r["bits_per_weight"], **t.metrics(),
                     "kurtosis": r["kurtosis"], "kurtosis_quantized": r["kurtosis_quantized"]})
    return sorted(rows, key=lambda r: (r["mse"], r["scheme"]))


def compare_source(*args: Any, **kwargs: Any) -> Any:
    """:func:`fmtsim.compare.source.compare_source`: every chosen tensor of a model folder,
    safetensors file or .npy under every scheme, as a :class:`~fmtsim.compare.source.Report`."""
    from .source import compare_source as run

    return run(*args, **kwargs)
