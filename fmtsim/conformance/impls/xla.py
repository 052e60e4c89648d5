"""``xla``: XLA through jax on the CPU: ``x.astype(dtype)`` into float8_e4m3fn, float8_e5m2,
float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu and float4_e2m1fn (XLA has no FP6 type),
from float16, bfloat16 and float32 (float64 needs jax's x64 mode, which is global: not run),
on the paths that can differ:

    xla[eager]   a jax array cast eagerly (the same kernels as jax.jit of the cast)
    xla[jit]     jax.jit of the cast, the array an argument
    xla[folded]  jax.jit of a function whose input is a constant, which XLA folds at compile time;
                 E4M3 and the FNUZ pair from every source, E5M2 from float16 and E8M0 from float32
                 only: folded FP4, E5M2 from float32/bfloat16 NaN payloads and E8M0 zeros from
                 float16/bfloat16 (0xFF there, 0x00 from float32) follow rules fmtsim does not model

held to fmtsim's ``xla`` and ``xla_folded`` profiles; and every code decoded to float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...formats import Format
from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request

TYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
         "e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu", "e2m1": "float4_e2m1fn"}
_JITTED: dict[str, Any] = {}


def _bytes(y: Any, n: int) -> np.ndarray:
    return np.asarray(y).view(np.uint8).reshape(-1)[:n].copy()


def _eager(x: np.ndarray, fmt: str) -> np.ndarray:
    import jax.numpy as jnp

    return _bytes(jnp.asarray(x).astype(getattr(jnp, TYPES[fmt])), x.size)


def _jit(x: np.ndarray, fmt: str) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    if fmt not in _JITTED:
        dt = getattr(jnp, TYPES[fmt])
        _JITTED[fmt] = jax.jit(lambda a: a.astype(dt))
    return _bytes(_JITTED[fmt](x), x.size)


def _folded(x: np.ndarray, fmt: str) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    dt = getattr(jnp, TYPES[fmt])
    const = np.ascontiguousarray(x)
    return _bytes(jax.jit(lambda: jnp.asarray(const).astype(dt))(), x.size)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    import jax.numpy as jnp
    import ml_dtypes

    # the codes as XLA's own type, then XLA's convert to float32
    typed = np.asarray(codes, dtype=np.uint8).view(getattr(ml_dtypes, TYPES[fmt]))
    return np.asarray(jnp.asarray(typed).astype(jnp.float32))


def _e8m0_subnormal(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a > 2.0**-127) & (a < 1.5 * 2.0**-127)


def _negative_finite(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return np.isfinite(a) & (a < 0)


DIVERGENCES = (
    Divergence("xla.e8m0_subnormal_ties_up", "xla", ("e8m0",), ("float32", "bfloat16"),
               "As ml_dtypes.e8m0_subnormal_ties_up (jax 0.10, CPU): float32/bfloat16 subnormals "
               "strictly between 2^-127 and 1.5*2^-127 encode as 0x01; the nearest is 0x00.",
               _e8m0_subnormal),
    Divergence("xla.folded_e8m0_negative_sign_bit", "xla[folded]", ("e8m0",), ("float16", "bfloat16", "float32"),
               "XLA's constant folding (jax 0.10) converts a negative x into E8M0 as |x| and then sets "
               "bit 7, as if E8M0 had a sign: -0.0078125 gives 0xF8 (2^121) instead of 0x78 (2^-7); "
               "-2^-127 gives 0x80.",
               _negative_finite),
)


def _path(label: str, fn: Callable[[np.ndarray, str], np.ndarray], profile: str) -> Adapter:
    divs = tuple(d for d in DIVERGENCES if d.implementation in ("xla", label))
    return Adapter(label, fn, profile=profile, formats=tuple(TYPES), sources=("float16", "bfloat16", "float32"),
                   divergences=divs)


class Xla(Implementation):
    name = "xla"
    aliases = ("jax",)
    summary = "XLA (jax, CPU) convert to FP8/E8M0/FP4: eager, jit, and constant-folded"
    requires = ("jax", "jaxlib")
    install = 'pip install "fmtsim[runtimes]"'
    capabilities = ("decode", "encode")
    profiles = ("xla", "xla_folded")
    divergences = DIVERGENCES
    checked_with = "jax/jaxlib 0.10.2 (CPU)"

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("xla", _decode, tuple(TYPES))]

    def encoders(self, req: Request) -> list[Adapter]:
        folded = _path("xla[folded]", _folded, "xla_folded")
        folded.formats = ("e4m3", "e4m3fnuz", "e5m2fnuz")
        folded_e5m2 = _path("xla[folded]", _folded, "xla_folded")
        folded_e5m2.formats, folded_e5m2.sources = ("e5m2",), ("float16",)
        folded_e8m0 = _path("xla[folded]", _folded, "xla_folded")
        folded_e8m0.formats, folded_e8m0.sources = ("e8m0",), ("float32",)
        return [_path("xla[eager]", _eager, "xla"), _path("xla[jit]", _jit, "xla"), folded, folded_e5m2,
                folded_e8m0]


IMPLEMENTATIONS = [Xla()]
