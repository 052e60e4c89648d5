"""``onnx_reference_sat`` / ``onnx_reference_nosat``: the ONNX reference evaluator's Cast
(opset 24/25 reference, onnx 1.23).

saturate=1: FP8 clips to +-max, then casts with ml_dtypes (RNE, NaN keeps its sign);
saturate=0: a plain ml_dtypes cast (FP8 overflow -> Inf / NaN). FP4 always casts with
ml_dtypes (saturating). E8M0 uses round_mode "up" by default. Integers round half to even and
clip (their NaN case is not checked against onnx: fmtsim writes 0). ``onnx_sat`` and
``onnx_nosat`` are the earlier names of the two.
"""

from __future__ import annotations

from collections.abc import Callable

from ..formats import Format
from ..policy import OverflowMode, Policy
from . import Provenance, Variant
from .microxcaling import E8M0_ALL_NAN


def _cast(overflow: OverflowMode) -> Callable[[Format], Policy]:
    def policy(fmt: Format) -> Policy:
        if fmt.kind == "int":
            return Policy("rne", "satfinite", "zero")
        return Policy("rne", overflow, "signed" if fmt.has_nan else "zero_sign_flipped")
    return policy


_READ = Provenance("onnx reference evaluator Cast (opsets 24/25)", version="1.23", date="2026-12-01")

_OVERFLOWS: tuple[tuple[str, OverflowMode], ...] = (("sat", "satfinite"), ("nosat", "nonsat"))
VARIANTS = tuple(
    Variant(f"onnx_reference_{name}", _READ, aliases=(f"onnx_{name}",),
            rules={"e8m0": Policy("rup", overflow, "signed", **E8M0_ALL_NAN)},  # type: ignore[arg-type]
            otherwise=_cast(overflow))
    for name, overflow in _OVERFLOWS
)
