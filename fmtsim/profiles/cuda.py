"""``cuda``: cuda_fp8.h / cuda_fp6.h / cuda_fp4.h host conversions (CUDA 13.0).

Checked bit for bit against the headers by ``fmtsim conform --impl cuda``. FP8 (RNE only):
NaN -> canonical 0x7F for every NaN; __NV_SATFINITE: Inf and overflow -> +-max; __NV_NOSAT:
overflow and +-Inf -> the NaN/Inf with the input's sign. FP4/FP6 always saturate, NaN ->
+max, rounding cudaRoundNearest or cudaRoundZero. E8M0: rounding cudaRoundZero or
cudaRoundPosInf, the magnitude rounded, below 2^-127 -> 0x00, above 2^127: 0xFE (satfinite)
or 0xFF (nosat). float64 sources: the NaN is narrowed as IEEE hardware does (sign kept,
quieted, top bits).
"""

from __future__ import annotations

from ..formats import Format
from ..policy import NanMode, Policy
from . import Provenance, Variant

# NVIDIA's E8M0 conversions (cuda_fp8.hpp __nv_cvt_*_to_e8m0, CUDA 13; cvt.rp/rz.satfinite.ue8m0x2):
# the absolute value is rounded; results below 2^-127 (zero included) clip to 0x00
E8M0_NVIDIA = {"e8m0_negative": "abs", "e8m0_zero": "min", "e8m0_tiny": "min"}


def _fp8(f64_nan: NanMode) -> Policy:
    return Policy("rne", "satfinite", "canonical", overflow_nan="signed", nan_sources=(("float64", f64_nan),))


def _others(fmt: Format) -> Policy:
    if fmt.kind == "int":
        return Policy("rne", "satfinite", "zero")
    return Policy("rne", "satfinite", "canonical" if fmt.has_nan else "max", overflow_nan="signed")


VARIANTS = (
    Variant("cuda", Provenance("CUDA 13.0 cuda_fp8.h/cuda_fp6.h/cuda_fp4.h host path, compiled with nvcc",
                               version="13.0", code_path="host", date="2026-12-01"),
            rules={"e8m0": Policy("rup", "satfinite", "signed", **E8M0_NVIDIA),  # type: ignore[arg-type]
                   "e4m3": _fp8("signed"), "e5m2": _fp8("quiet_payload")},
            otherwise=_others, versions=("13", None), code_paths=("host",)),
)
