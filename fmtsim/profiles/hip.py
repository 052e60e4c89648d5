"""``hip``: AMD HIP amd_hip_fp8.h host path (internal::cast_to_f8, from rocBLAS).

Read and compiled from ROCm clr at commit f9f995c (2024-10-22, after rocm-6.2.2): RNE; the
magnitude is compared with max finite BEFORE rounding; OCP NaN -> 0x7F with the input's sign
(E5M2 too); OCP Inf and overflow -> +-max with saturation, else E4M3 NaN with the sign / E5M2
+-Inf; FNUZ tests only the exponent, so NaN and Inf alike -> +-max with saturation and 0x80
without. A -0 into FNUZ is 0x00. Formats other than FP8 keep the OCP defaults. Half inputs go
through the host __half2float, which drops a NaN's sign.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

_OCP_FP8 = Policy("rne", "satfinite", "signed_all_ones", overflow_nan="signed_all_ones",
                  overflow_check="before", nan_unsigned_sources=("float16",))
_FNUZ_FP8 = Policy("rne", "satfinite", "as_inf", overflow_check="before", nan_unsigned_sources=("float16",))

VARIANTS = (
    Variant("hip", Provenance("ROCm clr f9f995c amd_hip_fp8.h host cast_to_f8, compiled", version="6.2.2",
                              code_path="host", date="2026-12-01"),
            rules={"e4m3": _OCP_FP8, "e5m2": _OCP_FP8, "e4m3fnuz": _FNUZ_FP8, "e5m2fnuz": _FNUZ_FP8},
            code_paths=("host",)),
)
