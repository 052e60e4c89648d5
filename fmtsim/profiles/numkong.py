"""``numkong_simd`` / ``numkong_serial``: NumKong 7.8 ``astype`` (float32 input), per kernel.

E4M3 and FP6 saturate (Inf too), E5M2 does not; RNE. NaN: x86 SIMD kernels: E4M3 and FP6 ->
+-max, E5M2 -> +-Inf; serial C: E4M3 the signed NaN, E5M2 0x7D with the NaN's sign
(0x7D/0xFD), FP6 +-max. The SIMD E5M2 NaN band is a named divergence
(conformance/impls/numkong.py).
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

_FP6 = Policy("rne", "satfinite", "signed_max")

VARIANTS = (
    Variant("numkong_simd", Provenance("NumKong astype", version="7.8", code_path="x86 SIMD", date="2026-12-01"),
            rules={"e4m3": Policy("rne", "satfinite", "signed_max"), "e5m2": Policy("rne", "nonsat", "inf"),
                   "e2m3": _FP6, "e3m2": _FP6},
            code_paths=("x86 SIMD",)),
    Variant("numkong_serial", Provenance("NumKong astype", version="7.8", code_path="serial", date="2026-12-01"),
            rules={"e4m3": Policy("rne", "satfinite", "signed"),
                   "e5m2": Policy("rne", "nonsat", "fixed", nan_code=0x7D, nan_code_sign="input"),
                   "e2m3": _FP6, "e3m2": _FP6},
            code_paths=("serial",)),
)
