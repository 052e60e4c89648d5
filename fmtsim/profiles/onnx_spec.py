"""``onnx_spec_sat`` / ``onnx_spec_nosat``: the ONNX Cast operator's own tables
(onnx/defs/tensor/defs.cc, the Cast schema doc of onnx 1.23, opset 25).

FP8, saturate=1: Inf and |x| > FLT_MAX -> +-FLT_MAX, NaN -> NaN, RNE; saturate=0: Inf -> NaN
(E4M3FN, FNUZ) or Inf (E5M2), overflow likewise, -NaN -> -NaN. E8M0 "saturate + up": 0 ->
E8M0_MIN, Inf and x > E8M0_MAX -> E8M0_MAX, x < E8M0_MIN -> E8M0_MIN; "non-saturate +
nearest": 0, Inf, overflow and x < E8M0_MIN -> NaN (x < 0 and -0 are "unspecified": fmtsim's
defaults for the mode). The table names no NaN code: the signed quiet NaN. Integers, FP4/FP6
and UE4M3 keep the OCP rules.
"""

from __future__ import annotations

from collections.abc import Callable

from ..formats import Format
from ..policy import OverflowMode, Policy
from . import Provenance, Variant
from .ocp import ocp_policy

_READ = Provenance("onnx Cast schema tables (onnx/defs/tensor/defs.cc, opset 25)", version="1.23",
                   date="2026-12-01")
_OCP = {name: "ocp" for name in ("e2m1", "e3m2", "e2m3", "ue4m3")}


def _fp8(overflow: OverflowMode) -> Callable[[Format], Policy]:
    def policy(fmt: Format) -> Policy:
        return ocp_policy(fmt) if fmt.kind == "int" else Policy("rne", overflow, "signed")
    return policy


VARIANTS = (
    Variant("onnx_spec_sat", _READ, otherwise=_fp8("satfinite"),
            rules={**_OCP, "e8m0": Policy("rup", "satfinite", "signed", e8m0_zero="min", e8m0_inf="max",
                                          e8m0_tiny="min")}),
    Variant("onnx_spec_nosat", _READ, otherwise=_fp8("nonsat"),
            rules={**_OCP, "e8m0": Policy("rne", "nonsat", "signed", e8m0_zero="nan", e8m0_inf="nan",
                                          e8m0_tiny="nan")}),
)
