"""``torchao``: torchao 0.18: FP8/E8M0 through PyTorch's casts (the torch profile); FP4/FP6
through its own bit casts (RNE, saturating, NaN payload rounded as 1.m)."""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

_BIT_CAST = Policy("rne", "satfinite", "payload_rounded")

VARIANTS = (
    Variant("torchao", Provenance("torchao f32_to_f4_unpacked / FP6 bit casts and torch 2.13.0 casts",
                                  version="0.18", code_path="CPU", date="2026-12-01"),
            rules={"e2m1": _BIT_CAST, "e3m2": _BIT_CAST, "e2m3": _BIT_CAST}, otherwise="torch"),
)
