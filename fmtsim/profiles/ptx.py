"""``ptx``: PTX ``cvt`` into FP8/FP6/FP4/E8M0 and integers, as the PTX ISA defines it.

.satfinite is mandatory for FP8/FP6/FP4; NaN -> canonical 0x7F for FP8, +MAX_NORM for
FP4/FP6; float->int cvt turns NaN into 0; E8M0 takes .rz or .rp only, and .rp
(cvt.rp.satfinite.ue8m0x2) is the one MX scale recipes use; its zero/negative/tiny results
(unspecified by PTX) are what NVIDIA's headers give, whose device path is that instruction:
equal to the cuda profile under satfinite.
"""

from __future__ import annotations

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant
from .cuda import E8M0_NVIDIA


def _ptx(fmt: Format) -> Policy:
    if fmt.kind == "int":
        return Policy("rne", "satfinite", "zero")
    return Policy("rne", "satfinite", "canonical" if fmt.has_nan else "max")


VARIANTS = (
    Variant("ptx", Provenance("PTX ISA cvt (the spec) and CUDA 13.0 headers for E8M0 specials", date="2026-12-01"),
            rules={"e8m0": Policy("rup", "satfinite", "canonical", **E8M0_NVIDIA)},  # type: ignore[arg-type]
            otherwise=_ptx),
)
