"""``openvino``: OpenVINO 2026.4 CPU plugin, Convert.

The CPU plugin converts to FP8 (E4M3, E5M2) by one of two code paths, chosen by instruction
set (``cpu_convert`` in its ``intel_cpu`` plugin):

``avx512_core_fp16``
    CPUs with AVX512-FP16 (Sapphire Rapids and later Xeons): oneDNN's JIT FP8 emulation.
``reference``
    every other CPU (AVX2 or AVX-512 without FP16, AMD's included, and non-x86 builds): each
    element through OpenVINO's own ``float8_e5m2`` / ``float8_e4m3`` constructors, which go
    through its software float32 -> float16 conversion (``ov::float16(float)``) and then round
    the float16 bits.

Both round f32 -> FP8 through f16 first (double rounding), never saturate, and keep a NaN's
sign; E8M0 and FP4 take one path everywhere. Where they differ (E5M2 only):

- NaN: the JIT path writes the NaN's top payload bits after quieting (IEEE narrowing:
  0x7C01 -> 0x7E); the reference path keeps the top two payload bits unquieted, so a NaN
  whose top bits are clear becomes an infinity (bfloat16 0x7F81 -> 0x7C). float16 sources
  are widened by F16C's vcvtph2ps first, which quiets them (0x7C01 -> 0x7E).
- float16's constructor doubles a value below 2^-15 whose significand, rounded to float16's
  11 bits, carries into the next power of two (it keeps the carried exponent and then shifts
  the unrounded significand into place): float32 0x377fffff (just below 2^-16) -> 0x02
  (2^-15), where one rounding and the JIT path give 0x01. This is policy field
  ``intermediate_carry='doubles_subnormal'``; it reproduces every one of the 24,576
  differences among all 469,762,048 float32 of magnitude 2^-40..2^-12, both signs.

E8M0: RNE (ties to the even code), 0, negatives, -Inf and -NaN -> 0x00, +Inf -> 0xFE,
NaN -> 0xFF. FP4: saturating, NaN -> +-6.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

_COMMON = {"e4m3": Policy("rne", "nonsat", "signed", intermediate="float16"),
           "e8m0": Policy("rne", "satfinite", "signed", nan_negative="fixed", nan_code=0x00),
           "e2m1": Policy("rne", "satfinite", "signed_max")}

VARIANTS = (
    Variant("openvino", Provenance("OpenVINO CPU plugin Convert", version="2026.4",
                                   code_path="avx512_core_fp16 (a 2-core Xeon)", date="2026-12-01"),
            rules={**_COMMON, "e5m2": Policy("rne", "nonsat", "quiet_payload", intermediate="float16")},
            code_paths=("avx512_core_fp16",)),
    Variant("openvino", Provenance("OpenVINO CPU plugin Convert", version="2026.4",
                                   code_path="reference (2-core AMD EPYCs: AVX2 only; AVX-512 with "
                                   "BF16, no FP16)", date="2026-12-03"),
            rules={**_COMMON, "e5m2": Policy("rne", "nonsat", "payload", intermediate="float16",
                                             intermediate_carry="doubles_subnormal",
                                             nan_sources=(("float16", "quiet_payload"),))},
            code_paths=("reference",)),
)
