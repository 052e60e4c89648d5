"""``ml_dtypes``: numpy ``astype`` into ml_dtypes' types (ml_dtypes 0.5/0.6).

Decodes every code to float32 (bit for bit, NaNs included) and encodes every coverage model
(float16, bfloat16, float32, float64 sources) against fmtsim's ``ml_dtypes`` profile; runs
the committed golden vectors whose policy it shares (rne, nonsat, signed NaN; not float64
inputs, not E8M0). Its named divergences are ``ml_dtypes.*``, below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...formats import FORMATS, get_format
from ..adapters import Adapter
from ..divergences import Divergence, e8m0_subnormal, through_float32
from ..plugin import Decoder, Implementation, Request

_FORMATS = tuple(n for n, f in FORMATS.items() if f.kind == "float" and f.ml_dtype is not None)


def _encode(x: np.ndarray, fmt: str) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(get_format(fmt).ml_dtype).view(np.uint8)


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    dt = get_format(fmt).ml_dtype
    assert dt is not None
    return codes.astype(np.uint8).view(dt).astype(np.float32)


# this implementation's named divergences (its bugs, each with the exact inputs it concerns)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "ml_dtypes.e8m0_subnormal_ties_up",
        "ml_dtypes",
        ("e8m0",),
        ("float32", "bfloat16"),
        "ml_dtypes 0.6 encodes float32/bfloat16 subnormal inputs strictly between 2^-127 and "
        "1.5*2^-127 as 0x01 (2^-126); the nearest E8M0 value is 0x00 (2^-127).",
        e8m0_subnormal,
    ),
    Divergence(
        "ml_dtypes.float64_double_rounding",
        "ml_dtypes",
        ("e2m1", "e3m2", "e2m3", "e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "e8m0", "e4m3ieee", "e3m4",
         "e4m3b11fnuz"),
        ("float64",),
        "ml_dtypes casts float64 arrays through float32 (two roundings); its scalar "
        "constructor rounds once. Example: 1.0625 + 2^-40 -> E4M3 gives 1.0, exact is 1.125.",
        through_float32("ml_dtypes"),
    ),
)


class MlDtypes(Implementation):
    name = "ml_dtypes"
    summary = "numpy astype into ml_dtypes' float8/float6/float4/e8m0 types"
    requires = ("ml_dtypes",)
    capabilities = ("decode", "encode", "vectors")
    profiles = ("ml_dtypes",)
    checked_with = "ml_dtypes 0.5, 0.6"
    divergences = DIVERGENCES

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("ml_dtypes", _decode, _FORMATS, nan_bits=True)]

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter("ml_dtypes", _encode, profile="ml_dtypes", formats=_FORMATS,
                        sources=("float16", "bfloat16", "float32", "float64"), divergences=DIVERGENCES)]

    def vector_encoder(self, meta: dict[str, Any], src: str
                       ) -> tuple[Callable[[np.ndarray, np.ndarray | None], Any], Adapter | None] | None:
        f = get_format(meta["format"]["name"])
        if not (f.ml_dtype is not None and f.has_nan and f.name != "e8m0" and meta["rounding"] == "rne"
                and meta["overflow"] == "nonsat" and src != "f64"):
            return None
        return (lambda x, rbits: _encode(x, f.name)), self.encoders(Request((), None, None, False))[0]


IMPLEMENTATIONS = [MlDtypes()]
