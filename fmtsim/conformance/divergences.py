"""Known, named differences between peers and the exact answer: the record, and the input
masks several implementations share.

Each :class:`Divergence` says which implementation and format it concerns, describes the
behaviour, and gives ``expected(x, fmt)``: a boolean mask of the inputs on which the peer is
known to differ from fmtsim's matching profile. Tests and ``fmtsim conform`` report such
differences by name instead of failing, and fail on any difference outside them. Each
implementation's divergences live in its conformance module (``impls/<name>.py``);
:func:`divergences_of` finds them by the implementation's name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..codec import encode
from ..formats import Format, get_format

__all__ = ["Divergence", "divergences_of", "explain", "explain_among", "e8m0_subnormal", "e8m0_subnormal_magnitude",
           "through_float32", "zero_or_negative"]


@dataclass(frozen=True)
class Divergence:
    name: str
    implementation: str
    formats: tuple[str, ...]
    sources: tuple[str, ...]  # input dtypes it concerns
    description: str
    # the inputs on which the peer may differ (for some, e.g. onnx's E8M0, a superset:
    # whether a huge negative differs depends on the peer's saturate flag)
    expected: Callable[[np.ndarray, Format], np.ndarray]


def e8m0_subnormal(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return (a > 2.0**-127) & (a < 1.5 * 2.0**-127)


def through_float32(profile: str) -> Callable[[np.ndarray, Format], np.ndarray]:
    def expected(x: np.ndarray, fmt: Format) -> np.ndarray:
        x64 = np.asarray(x, dtype=np.float64)
        with np.errstate(over="ignore"):
            x32 = x64.astype(np.float32)
        once = encode(x64, fmt, profile=profile)
        twice = encode(x32, fmt, profile=profile)
        return np.asarray(once != twice)
    return expected


def e8m0_subnormal_magnitude(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return e8m0_subnormal(np.abs(np.asarray(x, dtype=np.float64)), fmt)


def zero_or_negative(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return np.isfinite(a) & ((a == 0) | np.signbit(a))


def divergences_of(implementation: str) -> tuple[Divergence, ...]:
    """The named element divergences of a registered implementation (its ``divergences``)."""
    from .impls import get_implementation

    return tuple(get_implementation(implementation).divergences)


def explain(
    implementation: str, fmt: str | Format, source: str, x: np.ndarray
) -> dict[str, np.ndarray]:
    """name -> mask of inputs covered by each known divergence of ``implementation``."""
    return explain_among(divergences_of(implementation), fmt, source, x)


def explain_among(
    divergences: Iterable[Divergence], fmt: str | Format, source: str, x: np.ndarray
) -> dict[str, np.ndarray]:
    """name -> mask of inputs covered by each of ``divergences`` that concerns ``fmt`` and ``source``."""
    f = get_format(fmt)
    out = {}
    for d in divergences:
        if f.name in d.formats and source in d.sources:
            out[d.name] = d.expected(x, f)
    return out
