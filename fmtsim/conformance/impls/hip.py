"""``hip``: AMD's amd_hip_fp8.h host conversions through the shim of conformance.hip_impl
(compiled on first use against a ROCm tree), every entry point (format x overflow mode x
source type) held to ``encode(x, fmt, profile="hip", overflow=...)``, and every code decoded."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...formats import Format
from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request


def _vendor(overflow: str) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        from ..hip_impl import vendor_encode

        return vendor_encode(x, fmt, overflow)
    return encode


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    from ..hip_impl import vendor_decode

    return vendor_decode(fmt)[np.asarray(codes, dtype=np.int64)].view(np.float32)


def _hip_wide_shift(x: np.ndarray, fmt: Format) -> np.ndarray:
    """Inputs for which AMD's host cast_to_f8 shifts a 64-bit integer by 64 or more bits.

    It builds ``1ull << (mfmt - wm + exponent_diff)`` (mfmt: the source's significand
    bits, 52 for double, 23 for float, which half and bfloat16 go through; wm: the
    format's mantissa bits; exponent_diff = (1 - f8_bias) - the input's unbiased
    exponent, at least 1 - f8_bias + 126 for float subnormals): undefined in C++ once the
    count reaches 64, and on x86 the count wraps."""
    x = np.asarray(x)
    mfmt = 52 if x.dtype == np.float64 else 23
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.abs(x.astype(np.float64))
        _, e = np.frexp(a)
    act = e.astype(np.int64) - 1  # unbiased exponent of a normal input
    if mfmt == 23:  # float subnormals: the header uses the exponent field's 1 - bias
        act = np.maximum(act, -126)
    bias = (1 << (fmt.exp_bits - 1)) - 1 + (1 if fmt.specials == "fnuz" else 0)
    diff = (1 - bias) - act
    return np.isfinite(a) & (a > 0) & (mfmt - fmt.man_bits + diff >= 64)


# this implementation's named divergences (its bugs, each with the exact inputs it concerns)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "hip.shift_of_64_or_more",
        "hip",
        ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"),
        ("float32", "float64", "float16", "bfloat16"),
        "AMD's host cast_to_f8 (amd_hip_fp8.h, from rocBLAS) shifts a 64-bit integer by "
        "mfmt - wm + exponent_diff bits, 64 or more for inputs far below the format's smallest "
        "subnormal (float: |x| < 2^-49 into E4M3; double: |x| < 2^-20): undefined behaviour in "
        "C++; on x86 the count wraps and e.g. float 5.3e-23 gives E4M3 0x01 (exact: 0x00).",
        _hip_wide_shift,
    ),
)


class Hip(Implementation):
    name = "hip"
    summary = "AMD amd_hip_fp8.h host conversions (a shim built against a ROCm tree)"
    install = "a ROCm install (ROCM_PATH, HIP_PATH or /opt/rocm) and a C++ compiler"
    capabilities = ("decode", "encode")
    profiles = ("hip",)
    checked_with = "ROCm clr f9f995c (after rocm-6.2.2)"
    divergences = DIVERGENCES

    def missing(self) -> str | None:
        from ..hip_impl import missing

        return missing()  # its reasons start with "hip:" (shim_build's ``what``)

    def decoders(self, req: Request) -> list[Decoder]:
        from ..hip_impl import FORMATS

        return [Decoder("hip", _decode, tuple(FORMATS))]

    def encoders(self, req: Request) -> list[Adapter]:
        from ..hip_impl import FORMATS, OVERFLOWS, SOURCES

        return [Adapter(f"hip[{ov}]", _vendor(ov), profile="hip", formats=tuple(FORMATS), sources=SOURCES,
                        divergences=DIVERGENCES, options={"overflow": ov}) for ov in OVERFLOWS]


IMPLEMENTATIONS = [Hip()]
