"""``xla``: XLA through jax on the CPU: ``x.astype(dtype)`` into float8_e4m3fn, float8_e5m2,
float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu and float4_e2m1fn (XLA has no FP6 type),
from float16, bfloat16 and float32 (float64 needs jax's x64 mode, which is global: not run),
on the paths that can differ:

    xla[eager]       a jax array cast eagerly (the same kernels as jax.jit of the cast)
    xla[jit]         jax.jit of the cast, the array an argument
    xla[folded]      jax.jit of a function whose input is a compile-time constant, each input
                     folded as a small constant of its own would be: XLA's StableHLO folder
                     (LLVM APFloat) converts constants of at most 65536 elements that hold no
                     signalling NaN; a signalling NaN is folded apart (by the HLO evaluator)
    xla[folded_hlo]  a constant of more than 65536 elements (or any holding a signalling NaN),
                     which StableHLO's folder leaves to XLA's HLO evaluator

held to fmtsim's ``xla``, ``xla_folded`` and ``xla_folded_hlo`` profiles; and every code decoded
to float32. Which folder takes a constant is decided per constant, not per element: one
signalling NaN in a small constant hands every element of it to the HLO evaluator (jax 0.10.2:
measured with the compiled module, whose folded constant carries the convert's metadata only
when the HLO evaluator made it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...formats import Format
from ...sources import source_of
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


_STABLEHLO_FOLD_LIMIT = 65536  # elements: StableHLO's folder leaves bigger constants to XLA


def _fold(const: np.ndarray, fmt: str) -> np.ndarray:
    import jax
    import jax.numpy as jnp

    dt = getattr(jnp, TYPES[fmt])
    const = np.ascontiguousarray(const)
    return _bytes(jax.jit(lambda: jnp.asarray(const).astype(dt))(), const.size)


def _signaling(x: np.ndarray) -> np.ndarray:
    """Signalling NaNs of x's type: a NaN pattern whose top significand bit is clear."""
    st = source_of(x.dtype)
    assert st is not None, x.dtype
    ut, man = st.bits_dtype.type, st.man_bits
    b = x.view(ut)
    all_ones = ut(((1 << st.exp_bits) - 1) << man)
    field = b & ut((1 << man) - 1)
    return ((b & all_ones) == all_ones) & (field != 0) & (field & ut(st.quiet_bit) == 0)


def _folded(x: np.ndarray, fmt: str) -> np.ndarray:
    # each input as a small constant of its own: the quiet ones in constants StableHLO folds,
    # the signalling NaNs in one of their own (the HLO evaluator's, as each alone would be)
    out = np.empty(x.size, np.uint8)
    snan = _signaling(x)
    quiet = np.nonzero(~snan)[0]
    for i in range(0, quiet.size, _STABLEHLO_FOLD_LIMIT):
        part = quiet[i : i + _STABLEHLO_FOLD_LIMIT]
        out[part] = _fold(x[part], fmt)
    if snan.any():
        out[snan] = _fold(x[snan], fmt)
    return out


def _folded_hlo(x: np.ndarray, fmt: str) -> np.ndarray:
    # padded past StableHLO's limit with zeros, so that XLA's HLO evaluator folds it
    n = x.size
    padded = np.zeros(max(n, _STABLEHLO_FOLD_LIMIT + 1), x.dtype)
    padded[:n] = x
    return _fold(padded, fmt)[:n]


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
    summary = "XLA (jax, CPU) convert to FP8/E8M0/FP4: eager, jit, and constant-folded by either folder"
    requires = ("jax", "jaxlib")
    imports = ("jax.numpy",)
    install = 'pip install "fmtsim[runtimes]"'
    capabilities = ("decode", "encode")
    profiles = ("xla", "xla_folded", "xla_folded_hlo")
    divergences = DIVERGENCES
    checked_with = "jax/jaxlib 0.10.2 (CPU)"

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("xla", _decode, tuple(TYPES))]

    def encoders(self, req: Request) -> list[Adapter]:
        return [_path("xla[eager]", _eager, "xla"), _path("xla[jit]", _jit, "xla"),
                _path("xla[folded]", _folded, "xla_folded"), _path("xla[folded_hlo]", _folded_hlo, "xla_folded_hlo")]


IMPLEMENTATIONS = [Xla()]
