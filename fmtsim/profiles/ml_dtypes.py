"""``ml_dtypes``: ml_dtypes 0.6 numpy casts: RNE (E8M0 ties up), never saturating; NaN keeps its
sign, and into FP4/FP6 (no NaN) becomes the zero of the opposite sign."""

from __future__ import annotations

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant


def _cast(fmt: Format) -> Policy:
    return Policy("rne", "nonsat", "signed" if fmt.has_nan else "zero_sign_flipped")


VARIANTS = (
    Variant("ml_dtypes", Provenance("ml_dtypes numpy astype", version="0.6", date="2026-12-01"),
            rules={"e8m0": Policy("rna", "nonsat", "signed")}, otherwise=_cast, verified=("0.5", "0.6")),
)
