"""``torch``: PyTorch 2.13 ``Tensor.to`` casts (checked against torch 2.13.0, CPU).

E4M3 saturates (Inf too), E5M2 and FNUZ do not; E5M2 NaN is 0x7F/0xFF. E8M0 rounds ties up
like ml_dtypes. PyTorch has no cast into FP4/FP6/UE4M3/integers: OCP rules there. float64
tensors round through float32 (a named divergence, not a policy). Older releases differ:
torchao's to_mx notes that PyTorch 2.11 and older eager casts did not saturate finite E4M3
overflow (pytorch PR 178817 changed it); not run here, so no variant is declared for them.
"""

from __future__ import annotations

from ..policy import Policy
from . import Provenance, Variant

RULES = {
    "e4m3": Policy("rne", "satfinite", "signed"),
    "e5m2": Policy("rne", "nonsat", "signed_all_ones"),
    "e4m3fnuz": Policy("rne", "nonsat", "signed"),
    "e5m2fnuz": Policy("rne", "nonsat", "signed"),
    "e8m0": Policy("rna", "nonsat", "signed"),
}

VARIANTS = (
    Variant("torch", Provenance("torch Tensor.to", version="2.13.0", code_path="CPU", date="2026-12-01"),
            rules=RULES, code_paths=("CPU",)),
)
