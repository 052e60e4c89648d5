"""Which format suits these weights: quantize one tensor under a scheme spec with fmtsim's
own bit-exact quantizers and measure the error in float64.

Scheme spec grammar (``NAME[:OPTION]...``):

    int<b>[:sym|:asym][:tensor|:channel|:group=G]   fmtsim.intq (b in 2..8; default sym, tensor)
    mxfp8|mxfp8_e5m2|mxfp6|mxfp6_e2m3|mxfp4|mxint8[:rule=floor|ceil|even|rceil]   fmtsim.mx
    nvfp4[:recipe=te|torchao][:tile=1x16|16x16]     fmtsim.nvfp4

Symmetric integer scales are max|x| / (2^(b-1) - 1), codes round half to even (intq's
convention); the seed example [0.12, -0.53, 0.88, -0.07, 0.31, 1.40, -0.95, 0.02] in INT4
gives MSE 0.0042 per tensor and 0.00186 in groups of 4 (tests/test_compare.py).
Channels are rows (axis 0) and groups run along the last axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import intq, mx, nvfp4

__all__ = ["Scheme", "parse_scheme", "quantize_dequantize", "metrics", "compare"]


@dataclass(frozen=True)
class Scheme:
    spec: str
    family: str  # "int", "mx" or "nvfp4"
    name: str
    options: tuple[tuple[str, str], ...]

    def option(self, key: str, default: str) -> str:
        return dict(self.options).get(key, default)


def parse_scheme(spec: str) -> Scheme:
    """A Scheme from a spec string (module docstring); ValueError names the bad part."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"scheme spec must be a non-empty string, not {spec!r}")
    name, *parts = spec.lower().split(":")
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
        if key == "group":
            opts["granularity"] = "group"
        opts[key] = val
    if name.startswith("int") and name[3:].isdigit():
        family = "int"
        allowed = {"mode", "granularity", "group"}
    elif name in mx.SCHEMES or name in ("mxfp8", "mxfp6"):
        family, allowed = "mx", {"rule"}
    elif name == "nvfp4":
        family, allowed = "nvfp4", {"recipe", "tile"}
    else:
        raise ValueError(f"scheme {spec!r}: unknown name {name!r} (int<b>, an MX scheme, nvfp4)")
    bad = set(opts) - allowed
    if bad:
        raise ValueError(f"scheme {spec!r}: option {sorted(bad)[0]!r} does not apply to {name}")
    return Scheme(spec, family, name, tuple(sorted(opts.items())))


def quantize_dequantize(w: Any, scheme: Scheme | str) -> tuple[np.ndarray, float]:
    """(the dequantized tensor in float64, bits per weight including scale storage)."""
    s = parse_scheme(scheme) if isinstance(scheme, str) else scheme
    x = np.asarray(w)
    n = x.size
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
    tile_text = s.option("tile", "1x16")
    try:
        tile = tuple(int(t) for t in tile_text.split("x"))
    except ValueError:
        raise ValueError(f"scheme {s.spec!r}: tile must be like 1x16 or 16x16, not {tile_text!r}") from None
    qn = nvfp4.quantize(x, tile=tile, recipe=s.option("recipe", "te"))  # type: ignore[arg-type]
    scale_count = n // (tile[0] * tile[1])
    return nvfp4.dequantize(qn, np.float64), 4 + (8 * scale_count + 32) / n


def metrics(w: Any, w_hat: np.ndarray) -> dict[str, float]:
    """MSE, SQNR (dB), relative error, max abs error, share of nonzero weights snapped to zero,
    all in float64."""
    x = np.asarray(w, dtype=np.float64)
    e = np.asarray(w_hat, dtype=np.float64) - x
    mse = float(np.mean(e * e))
    power = float(np.mean(x * x))
    nonzero = x != 0
    return {
        "mse": mse,
        "sqnr_db": float(10 * np.log10(power / mse)) if mse > 0 else float("inf"),
        "rel_error": float(np.sqrt(mse / power)) if power > 0 else 0.0,
        "max_abs_error": float(np.max(np.abs(e))) if e.size else 0.0,
        "zeroed": float(np.mean((w_hat == 0)[nonzero])) if nonzero.any() else 0.0,
    }


def compare(w: Any, schemes: list[str]) -> list[dict[str, Any]]:
    """One row per scheme for the tensor ``w``: the metrics and bits per weight, ranked by MSE."""
    rows = []
    for spec in schemes:
        w_hat, bpw = quantize_dequantize(w, spec)
        rows.append({"scheme": spec, "bits_per_weight": bpw, **metrics(w, w_hat)})
    return sorted(rows, key=lambda r: (r["mse"], r["scheme"]))
