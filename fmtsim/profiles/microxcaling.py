"""``microxcaling``: the OCP MX reference code's element casts (mx/elemwise_ops.py).

Its default element rounding "nearest" is ties away; MX elements saturate. (Its subnormal
flush is a block-level option: mx.quantize(..., flush_subnormals=True).) It fake-quantizes to
float values (_quantize_elemwise_core, read, not run: it is not on PyPI): a NaN input stays a
NaN value, and an Inf input is written back as Inf after the saturating clamp. FP4/FP6 have no
code for either, so NaN keeps fmtsim's default (raise; signed NaN where the format has one);
only E5M2 could hold its Inf, which this profile saturates. E8M0 scales come from its own
shared-exponent code, so element E8M0 maps every special input to the NaN 0xFF.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

# every special input -> NaN 0xFF: the onnx reference evaluator's saturating cast does the same
E8M0_ALL_NAN = {"e8m0_negative": "nan", "e8m0_zero": "nan", "e8m0_inf": "nan"}

VARIANTS = (
    Variant("microxcaling", Provenance("microsoft/microxcaling mx/elemwise_ops.py (read, not run)", date="2026-12-01"),
            otherwise=Policy("rna", "satfinite", None, **E8M0_ALL_NAN)),  # type: ignore[arg-type]
)
