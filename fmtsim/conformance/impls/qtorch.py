"""``qtorch``: qtorch's ``float_quantize(x, exp, man, rounding="nearest")`` on the CPU, held to
fmtsim's ``qtorch`` profile for E4M3 and E5M2 as qtorch has them (the records ``qtorch_e4m3``,
max 480, and ``qtorch_e5m2``, max 114688: no Inf or NaN exponent, fmtsim.profiles.qtorch) and for
OCP's E2M1, E3M2 and E2M3 (which are qtorch's FP4/FP6 exactly).

qtorch returns float32 values; each is read back as the code of the emulated format that has that
value (``codes_of``; -1 where none has it). It takes float32 tensors only: float16 and bfloat16
inputs are given to it widened exactly to float32 by numpy (the NaN payload kept; torch's own
``.float()`` would turn every float16 NaN into 0x7FFFFFFF), float64 not at all. Importing
``qtorch.quant`` compiles its C++ extension with torch.utils.cpp_extension (ninja and a C++
compiler; about 30 s on first use, cached by torch in ~/.cache/torch_extensions).

Left out: ``rounding="stochastic"``, whose random numbers come from a std::mt19937 seeded from
std::random_device inside the extension (no seed or bits can be passed in), so no run can be
reproduced; and CUDA tensors (the same arithmetic in quant_cuda). Its bugs are the named
divergences below.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...codec import decode, encode
from ...formats import Format
from ...profiles.qtorch import FORMATS, RECORDS
from ..adapters import Adapter, codes_of
from ..divergences import Divergence
from ..plugin import Implementation, Request

SOURCES = ("float16", "bfloat16", "float32")


def _float32(x: np.ndarray) -> np.ndarray:
    """``x`` as the float32 tensor data qtorch is given: float32 as is, float16 and bfloat16
    widened exactly (every pattern, NaN payloads kept)."""
    if x.dtype == ml_dtypes.bfloat16:
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    if x.dtype == np.float32:
        return np.ascontiguousarray(x)
    if x.dtype == np.float16:
        return x.astype(np.float32)
    raise TypeError(f"qtorch float_quantize takes float32 tensors (and here float16/bfloat16 widened), not {x.dtype}")


def _quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    import torch
    from qtorch.quant import float_quantize

    exp, man = FORMATS[fmt]
    return float_quantize(torch.from_numpy(_float32(x).copy()), exp, man, rounding="nearest").numpy()


def _encode(x: np.ndarray, fmt: str) -> np.ndarray:
    rec = next((r for r in RECORDS if r.name == fmt), None)
    return codes_of(_quantize(x, fmt), rec if rec is not None else fmt)


# ---- its bugs: each predicate is the exact set of inputs, reproduced from qtorch's float arithmetic ----

def _subnormal_path(x: np.ndarray, fmt: Format) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the float32 inputs, the mask of those qtorch sends down its subnormal path, and its value
    for them): an exponent below emin, i.e. |x| < 2^emin (NaN and Inf never), where it computes
    ((x + s) rounded at ``man`` bits by adding half an ulp and truncating) - s, s = ±2^emin with
    the input's sign, in float32 arithmetic: x + s is rounded to float32 first."""
    x32 = _float32(x)
    emin = 1 - fmt.bias
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.abs(x32.astype(np.float64))
        low = np.isfinite(a) & (a < 2.0**emin)
        s = np.where(np.signbit(x32), np.float32(-(2.0**emin)), np.float32(2.0**emin)).astype(np.float32)
        shifted = (x32 + s).astype(np.float32)  # the float32 addition qtorch does (nearest-even)
        mask = np.uint32((1 << (23 - fmt.man_bits)) - 1)
        half = np.uint32(1 << (22 - fmt.man_bits))
        rounded = ((shifted.view(np.uint32) + half) & ~mask).view(np.float32)
        value = (rounded - s).astype(np.float32)
    return x32, low, value


def _exact(x: np.ndarray, fmt: Format) -> np.ndarray:
    """The value the profile gives (round to nearest, ties away, once from the exact input)."""
    return decode(encode(_float32(x), fmt, profile="qtorch"), fmt, np.float64)


def _double_rounding(x: np.ndarray, fmt: Format) -> np.ndarray:
    x32, low, value = _subnormal_path(x, fmt)
    with np.errstate(invalid="ignore"):
        return low & (np.abs(value.astype(np.float64)) != np.abs(_exact(x, fmt)))


def _nan_carry(x: np.ndarray, fmt: Format) -> np.ndarray:
    x32 = _float32(x)
    bits = x32.view(np.uint32).astype(np.uint64) & np.uint64(0x7FFFFFFF)
    with np.errstate(invalid="ignore"):
        return np.isnan(x32) & (bits + np.uint64(1 << (22 - fmt.man_bits)) >= np.uint64(1 << 31))


ALL = tuple(FORMATS)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "qtorch.subnormal_double_rounding", "qtorch", ALL, SOURCES,
        "for |x| < 2^emin qtorch first adds ±2^emin in float32 (rounding x to float32's precision at 2^emin, "
        "ties to even) and then rounds that sum at the format's precision (ties away): a float32 input just "
        "below a tie of the subnormal grid is rounded up onto the tie and then away (0x3A7FFFFF, just under "
        "2^-10, gives E4M3 code 0x01 = 2^-9; rounded once it is 0). Only float32 inputs with bits below "
        "2^(emin - 23), i.e. below float32's own precision at 2^emin (float16 inputs never; bfloat16 ones far "
        "below the subnormals, which round to 0 either way).",
        _double_rounding),
    Divergence(
        "qtorch.nan_carry_into_sign", "qtorch", ALL, SOURCES,
        "a NaN whose float32 pattern, plus the half ulp qtorch adds to round it, carries out of the exponent "
        "into the sign bit (|bits| + 2^(22 - man) >= 2^31: 0x7FFFFFFF into every format, the float16 NaNs from "
        "0x7F00 up into E2M1 and from 0x7FC0 up into E4M3) comes out as a zero of the opposite sign (-0.0, or +0 for a "
        "negative NaN whose add wraps) instead of ±max; every other NaN is clamped to ±max (the profile).",
        _nan_carry),
)


class Qtorch(Implementation):
    name = "qtorch"
    summary = "qtorch float_quantize(rounding='nearest') on CPU tensors, E4M3/E5M2 (its own, no NaN/Inf), FP4/FP6"
    requires = ("torch", "qtorch")
    imports = ("qtorch.quant",)  # compiles qtorch's C++ extension on first import (ninja, a C++ compiler)
    install = "pip install qtorch==0.3.0 (needs torch, ninja and a C++ compiler: it JIT-compiles its extension)"
    capabilities = ("encode",)
    profiles = ("qtorch",)
    divergences = DIVERGENCES
    checked_with = "qtorch 0.3.0 (torch 2.13.0 CPU)"

    def profile_version(self) -> str | None:
        import importlib.metadata

        try:
            return importlib.metadata.version("qtorch")
        except importlib.metadata.PackageNotFoundError:
            return None

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter("qtorch[nearest]", _encode, profile="qtorch", formats=ALL, sources=SOURCES,
                        divergences=DIVERGENCES, records=RECORDS)]


IMPLEMENTATIONS = [Qtorch()]
