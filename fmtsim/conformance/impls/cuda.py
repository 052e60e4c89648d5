"""``cuda``: NVIDIA's cuda_fp8.h / cuda_fp6.h / cuda_fp4.h host conversions through the shim
of conformance.cuda_impl (compiled on first use against the user's CUDA headers), every
entry point (format x overflow mode x rounding mode x source type) held to
``encode(x, fmt, profile="cuda", overflow=..., rounding=...)``, and every code decoded."""

from __future__ import annotations

from collections.abc import Callable

import ml_dtypes
import numpy as np

from ..adapters import Adapter
from ..plugin import Decoder, Implementation, Request


def _vendor(overflow: str, rounding: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        from ..cuda_impl import vendor_encode

        return vendor_encode(x, fmt, overflow, rounding)
    return encode


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    from ..cuda_impl import vendor_decode

    half = vendor_decode(fmt)[np.asarray(codes, dtype=np.int64)]  # NVIDIA's half / bfloat16 bits
    return half.view(ml_dtypes.bfloat16 if fmt == "e8m0" else np.float16).astype(np.float32)


class Cuda(Implementation):
    name = "cuda"
    summary = "NVIDIA cuda_fp8.h/cuda_fp6.h/cuda_fp4.h host conversions (a shim built against the CUDA headers)"
    install = 'a CUDA toolkit, or pip install "fmtsim[cuda]", and a C++ compiler'
    capabilities = ("decode", "encode")
    profiles = ("cuda",)
    checked_with = "CUDA 13.0 headers"
    divergences = ()  # none found: 0 differences on all 2^32 float32 inputs

    def missing(self) -> str | None:
        from ..cuda_impl import missing

        return missing()  # its reasons start with "cuda:" (shim_build's ``what``)

    def version(self) -> str:
        from ..cuda_impl import version

        return f"CUDA {version()}"

    def profile_version(self) -> str | None:
        from ..cuda_impl import version

        return version()  # CUDART_VERSION of the headers the shim was built against

    def decoders(self, req: Request) -> list[Decoder]:
        from ..cuda_impl import ENTRY_POINTS

        return [Decoder("cuda", _decode, tuple(ENTRY_POINTS))]

    def encoders(self, req: Request) -> list[Adapter]:
        from ..cuda_impl import ENTRY_POINTS

        return [Adapter(f"cuda[{fmt},{ov},{rm}]", _vendor(ov, rm), profile="cuda", formats=(fmt,), sources=srcs,
                        divergences=(), options={"overflow": ov, "rounding": rm})
                for fmt, (ovs, rms, srcs) in ENTRY_POINTS.items() for ov in ovs for rm in rms]


IMPLEMENTATIONS = [Cuda()]
