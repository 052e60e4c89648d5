"""``xla`` / ``xla_folded`` / ``xla_folded_hlo``: XLA through jax 0.10 (CPU), per code path.

``xla`` (eager, equal to jit): ml_dtypes' casts except E5M2 from f16/bf16, whose NaN is 0x7F
whatever its sign, and FP4, whose NaN is 0x8 (-0) whatever its sign. XLA has no FP6 type.
A cast of a compile-time constant is folded by one of two folders, chosen per constant:
``xla_folded``: StableHLO's folder, which converts with LLVM APFloat (the apfloat profile;
E8M0: ties up, |x| converted, 0 -> 0x00; negatives' extra bit 7 is a named divergence,
conformance/impls/xla.py). It gives up on a constant of more than 65536 elements or one
holding a signalling NaN; a signalling NaN folded on its own gets the HLO evaluator's code.
``xla_folded_hlo``: XLA's HLO evaluator, which folds those: the eager casts but for NaN into
E5M2 (from f16: its quieted payload's top bits; from bf16/f32: the signed quiet NaN) and into
FP4 (ml_dtypes' zero of the opposite sign).
"""

from __future__ import annotations

from dataclasses import replace

from ..formats import Format
from ..policy import NanMode, Policy
from ..sources import SourceName
from . import Provenance, Variant

_EAGER = {
    "e2m1": Policy("rne", "satfinite", "neg_zero"),
    "e5m2": Policy("rne", "nonsat", "signed", nan_sources=(("float16", "canonical"), ("bfloat16", "canonical")),
                   overflow_nan="signed"),
}

# a signalling NaN gets the HLO evaluator's code where that differs from APFloat's
_SNAN: dict[str, tuple[tuple[SourceName, NanMode], ...]] = {"e5m2": (("bfloat16", "signed"), ("float32", "signed")),
         "e2m1": (("float16", "zero_sign_flipped"), ("bfloat16", "zero_sign_flipped"),
                  ("float32", "zero_sign_flipped"))}


def _folded(fmt: Format) -> Policy:
    from . import PROFILES

    return replace(PROFILES["apfloat"](fmt), nan_signaling_sources=_SNAN.get(fmt.name, ()))


def _read(path: str) -> Provenance:
    return Provenance("jax/XLA convert_element_type", version="0.10", code_path=path, date="2026-12-01")


VARIANTS = (
    Variant("xla", _read("eager"), rules=_EAGER, otherwise="ml_dtypes", code_paths=("eager",)),
    Variant("xla_folded", _read("folded"), code_paths=("folded",), otherwise=_folded,
            rules={"e8m0": Policy("rna", "nonsat", "signed", e8m0_negative="abs", e8m0_zero="min")}),
    Variant("xla_folded_hlo", _read("folded_hlo"), code_paths=("folded_hlo",), otherwise="xla",
            rules={"e5m2": Policy("rne", "nonsat", "signed", nan_sources=(("float16", "quiet_payload"),)),
                   "e2m1": "ml_dtypes"}),
)
