"""``hip``: AMD's amd_hip_fp8.h host conversions through the shim of conformance.hip_impl
(compiled on first use against a ROCm tree), every entry point (format x overflow mode x
source type) held to ``encode(x, fmt, profile="hip", overflow=...)``, and every code decoded."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..adapters import Adapter
from ..divergences import DIVERGENCES
from ..plugin import Decoder, Implementation, Request


def _vendor(overflow: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        from ..hip_impl import vendor_encode

        return vendor_encode(x, fmt, overflow)
    return encode


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    from ..hip_impl import vendor_decode

    return vendor_decode(fmt)[np.asarray(codes, dtype=np.int64)].view(np.float32)


class Hip(Implementation):
    name = "hip"
    summary = "AMD amd_hip_fp8.h host conversions (a shim built against a ROCm tree)"
    install = "a ROCm install (ROCM_PATH, HIP_PATH or /opt/rocm) and a C++ compiler"
    capabilities = ("decode", "encode")
    profiles = ("hip",)
    checked_with = "ROCm clr f9f995c (after rocm-6.2.2)"
    divergences = tuple(d for d in DIVERGENCES if d.implementation == "hip")

    def missing(self) -> str | None:
        from ..hip_impl import missing

        return missing()  # its reasons start with "hip:" (shim_build's ``what``)

    def decoders(self, req: Request) -> list[Decoder]:
        from ..hip_impl import FORMATS

        return [Decoder("hip", _decode, tuple(FORMATS))]

    def encoders(self, req: Request) -> list[Adapter]:
        from ..hip_impl import FORMATS, OVERFLOWS, SOURCES

        return [Adapter(f"hip[{ov}]", _vendor(ov), profile="hip", formats=tuple(FORMATS), sources=SOURCES,
                        divergences="hip", options={"overflow": ov}) for ov in OVERFLOWS]


IMPLEMENTATIONS = [Hip()]
