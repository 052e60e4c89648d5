"""``te``: TransformerEngine's Python reference recipes (transformer_engine/pytorch/custom_recipes).

FP4 by the NVFP4 reference's interval cast (RNE, saturating, NaN and -0.0 -> code 0); FP8 by a
plain PyTorch cast, (x * scale).to(float8), as in its current-scaling reference, so the torch
profile; E8M0 scales rounded up, as its power-of-two scales (ceil of log2) and MXFP8 recipe do
(the ptx profile). TE's CUDA kernels convert with cvt.rn.satfinite instead: use the ptx
profile for them.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

VARIANTS = (
    Variant("te", Provenance("TransformerEngine pytorch/custom_recipes (read)", date="2026-12-01"),
            rules={"e2m1": Policy("rne", "satfinite", "zero", neg_zero_input="positive"), "e4m3": "torch",
                   "e5m2": "torch", "e4m3fnuz": "torch", "e5m2fnuz": "torch"},
            otherwise="ptx"),
)
