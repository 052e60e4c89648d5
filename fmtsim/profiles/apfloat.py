"""``apfloat``: LLVM APFloat::convert (LLVM 19): IEEE semantics, never saturating.

Overflow gives the format's NaN/Inf; NaN keeps its sign (E5M2: its payload's top bits,
quieted); the FiniteOnly FP4/FP6 formats clamp overflow to +-max and map +-Inf and +-NaN to a
zero of the same sign. E8M0 (LLVM 20+): ties go up. The rounding mode is the caller's (all
five of APFloat's: rne, rna, rtz, rup, rdn).

Status flags (opStatus of APFloat::convert, LLVM 19; checked flag for flag by ``fmtsim
conform --impl apfloat``): underflow when the result itself is subnormal or zero; overflow
only when the result is Inf or NaN; invalid exactly for signalling NaN inputs; Inf -> NaN is
inexact, Inf -> +-0 (FP4/FP6) exact; -0 into FNUZ inexact.
"""

from __future__ import annotations

from dataclasses import replace

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant


def apfloat_flags(pol: Policy) -> Policy:
    """``pol`` with LLVM APFloat's status-flag conventions."""
    return replace(pol, tininess="result", flag_overflow="infinite", flag_nan="signaling", flag_inf_nan="inexact",
                   flag_inf_number="none", flag_neg_zero="inexact")


_FINITE_ONLY = apfloat_flags(Policy("rne", "satfinite", "zero", nan_negative="neg_zero", inf="zero"))


def _ieee(fmt: Format) -> Policy:
    return apfloat_flags(Policy("rne", "nonsat", "signed" if fmt.has_nan else None))


VARIANTS = (
    Variant("apfloat", Provenance("LLVM APFloat::convert, compiled against llvm-19-dev", version="19.1.7",
                                  date="2026-12-01"),
            rules={"e2m1": _FINITE_ONLY, "e3m2": _FINITE_ONLY, "e2m3": _FINITE_ONLY,
                   "e8m0": apfloat_flags(Policy("rna", "nonsat", "signed")),
                   "e5m2": apfloat_flags(Policy("rne", "nonsat", "quiet_payload"))},
            otherwise=_ieee, verified=("19",)),
)
