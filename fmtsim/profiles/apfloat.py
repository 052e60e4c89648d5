"""``apfloat``: LLVM APFloat::convert: IEEE semantics, never saturating.

Overflow gives the format's NaN/Inf; NaN keeps its sign (E5M2: its payload's top bits,
quieted); the FiniteOnly FP4/FP6 formats clamp overflow to +-max and map +-Inf and +-NaN to a
zero of the same sign. The rounding mode is the caller's (all five of APFloat's: rne, rna,
rtz, rup, rdn).

Two variants, by LLVM version. LLVM 19 has no E8M0. LLVM 20 added ``Float8E8M0FNU``, which
APFloat converts as a signed binary format of precision 1 (no significand bits) with a zero,
packed into the code's 8 bits afterwards (``e8m0_encoding='signed_exponent'``, read off LLVM
22.1.8 on 2026-12-03, every float16 and bfloat16 pattern and the float32/float64 coverage
models, all five modes, codes and flags):

- ties under rne go away from zero (the "even" neighbour is judged by a 1-bit significand,
  1 for every power of two), except 2^-128, between 0 and 2^-127, which goes to 0;
- a result of 0 (from +-0 exactly, or a tiny input rounded down, with underflow) is 0x00;
- a negative result keeps its sign in bit 7: -1 -> 0xFF (the NaN), -0.5 -> 0xFE (2^127),
  -2 -> 0x80 (= +2); overflow gives 0xFF (overflow, inexact), 0xFE toward zero;
- +-Inf -> 0xFF (inexact), NaN -> 0xFF (invalid for a signalling NaN);
- decoding 0xFF gives +Inf, not NaN: the named divergence ``apfloat.e8m0_ff_decodes_inf``.

Status flags (opStatus of APFloat::convert; checked flag for flag by ``fmtsim conform --impl
apfloat``): underflow when the result itself is subnormal or zero; overflow only when the
result is Inf or NaN; invalid exactly for signalling NaN inputs; Inf -> NaN is inexact, Inf ->
+-0 (FP4/FP6) exact; -0 into FNUZ inexact.
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


_RULES = {"e2m1": _FINITE_ONLY, "e3m2": _FINITE_ONLY, "e2m3": _FINITE_ONLY,
          "e5m2": apfloat_flags(Policy("rne", "nonsat", "quiet_payload"))}

VARIANTS = (
    # the default variant (encode(..., profile="apfloat")): the newest LLVM read off
    Variant("apfloat", Provenance("LLVM APFloat::convert, compiled against llvm-22-dev", version="22.1.8",
                                  date="2026-12-03"),
            rules={**_RULES, "e8m0": apfloat_flags(Policy("rne", "nonsat", "signed",
                                                          e8m0_encoding="signed_exponent"))},
            otherwise=_ieee, versions=("20", None), verified=("22",)),
    Variant("apfloat", Provenance("LLVM APFloat::convert, compiled against llvm-19-dev", version="19.1.7",
                                  date="2026-12-01"),
            rules=_RULES, otherwise=_ieee, versions=(None, "20"), verified=("19",)),
)
