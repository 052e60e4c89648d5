"""``onnxruntime_sat`` / ``onnxruntime_nosat``: onnxruntime 1.32 CPU Cast kernels (opsets 21-25 agree).

FP8: RNE, saturate=1 clips Inf and overflow to +-max; NaN keeps its sign, E5M2's is
0x7F/0xFF; saturate=0 gives the format's NaN/Inf, and bfloat16 sources lose the NaN's sign
there (0x7F). DOUBLE sources round through float32 first. E8M0 (round_mode "up"): saturate=1
clamps 0, negatives and -Inf to 0x00 and +Inf to 0xFE; saturate=0 gives NaN for them and for
0 < x < 2^-127. No FP4 kernel. Its two non-saturating overflow bugs are named divergences
(conformance/impls/onnxruntime.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..formats import Format
from ..policy import NanMode, OverflowMode, Policy
from ..sources import SourceName
from . import Provenance, Variant
from .ocp import ocp_policy


def _fp8(saturate: bool) -> Callable[[Format], Policy]:
    overflow: OverflowMode = "satfinite" if saturate else "nonsat"

    def policy(fmt: Format) -> Policy:
        if fmt.kind == "int":
            return ocp_policy(fmt)
        nan: Literal["signed_all_ones", "signed"] = "signed_all_ones" if fmt.name == "e5m2" else "signed"
        bf16: tuple[tuple[SourceName, NanMode], ...] = ()
        if not saturate and fmt.name in ("e4m3", "e5m2"):
            bf16 = (("bfloat16", "canonical"),)
        return Policy("rne", overflow, nan, nan_sources=bf16, overflow_nan=nan if fmt.has_nan else None,
                      intermediate="float32")
    return policy


_READ = Provenance("onnxruntime CPU Cast kernels (opsets 21-25)", version="1.32", code_path="CPU",
                   date="2026-12-01")
_OCP = {name: "ocp" for name in ("e2m1", "e3m2", "e2m3", "ue4m3")}

VARIANTS = (
    Variant("onnxruntime_sat", _READ, otherwise=_fp8(True),
            rules={**_OCP, "e8m0": Policy("rup", "satfinite", "signed", intermediate="float32")}),
    Variant("onnxruntime_nosat", _READ, otherwise=_fp8(False),
            rules={**_OCP, "e8m0": Policy("rup", "nonsat", "signed", intermediate="float32", e8m0_tiny="nan")}),
)
