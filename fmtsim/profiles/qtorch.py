"""``qtorch``: qtorch 0.3.0's ``float_quantize(x, exp, man, rounding="nearest")`` (its CPU extension).

qtorch emulates a float format of ``exp`` exponent and ``man`` mantissa bits, bias 2^(exp-1) - 1,
that reserves no exponent for Inf or NaN ("we are not reserving an exponent bit for infinity, nan,
etc", quant_cpu/bit_helper.cpp): every code is a finite number. For E2M1, E3M2 and E2M3 that is
OCP's FP4/FP6, fmtsim's own ``e2m1``/``e3m2``/``e2m3``; for E4M3 and E5M2 it is not OCP's (whose
top exponent holds NaN, or Inf and NaN), so the records below are qtorch's: ``qtorch_e4m3``
reaches 480 (OCP E4M3: 448), ``qtorch_e5m2`` 114688 (OCP E5M2: 57344).

The rules, read off qtorch's source and checked on every float16 and bfloat16 pattern and 2^18
random float32 patterns (for qtorch_e4m3 and E2M1, on every float32 pattern):

- ``nearest`` adds half an ulp to the float32 bit pattern and truncates: round to nearest, ties
  away from zero (``rna``), although qtorch's README says ties to even. This is qtorch's rule
  (the same code on CPU and CUDA), so it is the profile's; the README is what is wrong.
- a result beyond the largest finite value is clamped to it with the input's sign
  (``clip_exponent``), ±Inf too: satfinite.
- a NaN input is clamped the same way: ±max with the NaN's sign (``nan='signed_max'``).
- every zero result is +0: a subnormal result is computed as (x + s·2^emin) - s·2^emin with s the
  input's sign, and x - x is +0 in float arithmetic: ``neg_underflow='positive'`` (a negative input
  that rounds to zero) with ``neg_zero_input='positive'`` (the input -0.0).
"""

from __future__ import annotations

from ..formats import Format
from ..policy import Policy
from . import Provenance, Variant

#: qtorch's E4M3 and E5M2: every exponent holds finite numbers, no Inf, no NaN (each stands in for
#: fmtsim's format of the same shape in ``fmtsim conform --formats e4m3``)
QTORCH_E4M3 = Format("qtorch_e4m3", "float", 4, 3, 7, specials="none", aliases=("e4m3",),
                     title="qtorch E4M3: bias 7, no Inf/NaN exponent, max 480",
                     source="qtorch 0.3.0 quant_cpu/bit_helper.cpp clip_exponent")
QTORCH_E5M2 = Format("qtorch_e5m2", "float", 5, 2, 15, specials="none", aliases=("e5m2",),
                     title="qtorch E5M2: bias 15, no Inf/NaN exponent, max 114688",
                     source="qtorch 0.3.0 quant_cpu/bit_helper.cpp clip_exponent")
#: qtorch's formats as fmtsim holds them, by (exp, man): its records, or fmtsim's FP4/FP6
FORMATS: dict[str, tuple[int, int]] = {"qtorch_e4m3": (4, 3), "qtorch_e5m2": (5, 2), "e2m1": (2, 1),
                                       "e3m2": (3, 2), "e2m3": (2, 3)}
RECORDS = (QTORCH_E4M3, QTORCH_E5M2)

def _nearest(fmt: Format) -> Policy:
    # E8M0 (no sign, no mantissa) is no shape qtorch has; its NaN can only be 0xFF
    return Policy("rna", "satfinite", "signed" if fmt.name == "e8m0" else "signed_max", neg_zero_input="positive",
                  neg_underflow="positive")


VARIANTS = (
    Variant("qtorch", Provenance("qtorch float_quantize(rounding='nearest') (CPU extension)", version="0.3.0",
                                 date="2026-12-04"),
            otherwise=_nearest),
)
