"""``ocp``: the OCP specs' own rules (OFP8 v1.0, MX v1.0): RNE, saturating, the canonical NaN."""

from __future__ import annotations

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant


def ocp_policy(fmt: Format) -> Policy:
    """RNE, saturating; NaN the canonical code where the format has one, else raise."""
    return Policy("rne", "satfinite", "canonical" if fmt.has_nan else "raise")


VARIANTS = (
    Variant("ocp", Provenance("OCP OFP8 v1.0 and OCP MX v1.0 (the specs)", date="2026-12-01"), otherwise=ocp_policy),
)
