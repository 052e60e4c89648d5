"""``openvino``: OpenVINO 2026.4 CPU plugin, Convert.

f32 -> FP8 rounds through f16 first (double rounding), never saturates, NaN keeps its sign;
E5M2 NaN codes are the NaN's top payload bits after quieting (IEEE narrowing: 0x7C01 -> 0x7E,
0x7FBD937D -> 0x7F). E8M0: RNE (ties to the even code), 0, negatives, -Inf and -NaN -> 0x00,
+Inf -> 0xFE, NaN -> 0xFF. FP4: saturating, NaN -> +-6. The f16 double rounding accounts for
every difference from one rounding (no divergence). The CPU plugin picks its conversion
kernel by instruction set: this variant was read off a 2-core Xeon's kernel.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

VARIANTS = (
    Variant("openvino", Provenance("OpenVINO CPU plugin Convert", version="2026.4", code_path="x86 (2-core Xeon)",
                                   date="2026-12-01"),
            rules={"e4m3": Policy("rne", "nonsat", "signed", intermediate="float16"),
                   "e5m2": Policy("rne", "nonsat", "quiet_payload", intermediate="float16"),
                   "e8m0": Policy("rne", "satfinite", "signed", nan_negative="fixed", nan_code=0x00),
                   "e2m1": Policy("rne", "satfinite", "signed_max")}),
)
