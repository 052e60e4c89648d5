"""``gfloat``: gfloat round_float + encode_float defaults: TiesToEven (E8M0: the even code),
sat=False, every NaN written as the all-ones code; FP4/FP6 NaN raises there too."""

from __future__ import annotations

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant


def _gfloat(fmt: Format) -> Policy:
    return Policy("rne", "nonsat", "all_ones" if fmt.has_nan else "raise")


VARIANTS = (
    Variant("gfloat", Provenance("gfloat round_float/encode_float", version="0.5", date="2026-12-01"),
            otherwise=_gfloat),
)
