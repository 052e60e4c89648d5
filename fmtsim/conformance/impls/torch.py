"""``torch``: PyTorch's FP8/E8M0 ``Tensor.to`` casts and their decodes, held to fmtsim's
``torch`` profile; its named divergences are ``torch.*`` (TORCH_DIVERGENCES).

``Tensor.to`` into float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz and
float8_e8m0fnu, from float16, bfloat16, float32 and float64 tensors. PyTorch cannot cast into
FP4/FP6 (float4_e2m1fn_x2 has no copy kernel), UE4M3 or integers; torchao's FP4/FP6 casts are
the ``torchao`` implementation (impls/torchao.py, which shares :func:`_tensor` here).

Checked against torch 2.13.0 (CPU) (``pip install "fmtsim[torch]"``). torch is imported only
when an implementation that needs it is asked for.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ..adapters import Adapter
from ..divergences import Divergence, e8m0_subnormal_magnitude, through_float32, zero_or_negative
from ..plugin import Decoder, Implementation, Request

TORCH_DTYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
                "e5m2fnuz": "float8_e5m2fnuz", "e8m0": "float8_e8m0fnu"}

# torch's named element divergences
TORCH_DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "torch.float64_through_float32",
        "torch",
        ("e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0"),
        ("float64",),
        "PyTorch 2.13 casts float64 tensors to FP8/E8M0 through float32 (two roundings): "
        "float64 2^-10 + 2^-62 -> E4M3 gives 0 (the float32 tie rounds to even), exact is 2^-9.",
        through_float32("torch"),
    ),
    Divergence(
        "torch.e8m0_zero_and_sign",
        "torch",
        ("e8m0",),
        ("float16", "bfloat16", "float32", "float64"),
        "PyTorch 2.13's cast to float8_e8m0fnu reads the exponent and mantissa bits only: "
        "+-0 becomes 0x00 and a negative x the code of |x| (fmtsim: NaN 0xFF, since E8M0 has "
        "no zero or sign, OCP MX 5.4.1, as ml_dtypes does).",
        zero_or_negative,
    ),
    Divergence(
        "torch.e8m0_subnormal_ties_up",
        "torch",
        ("e8m0",),
        ("float32", "bfloat16", "float64"),
        "As ml_dtypes: float32/bfloat16 subnormals strictly between 2^-127 and 1.5*2^-127 "
        "(of either sign, see torch.e8m0_zero_and_sign) encode as 0x01; the nearest is 0x00.",
        e8m0_subnormal_magnitude,
    ),
)


def missing() -> str | None:
    """Why the torch implementation cannot run here (None when it can)."""
    return Torch().missing()


def _tensor(x: np.ndarray) -> Any:
    import torch

    x = np.ascontiguousarray(x)
    if x.dtype == ml_dtypes.bfloat16:  # numpy has no bfloat16 that torch knows: move the bits
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def _torch_encode(x: np.ndarray, fmt: str) -> np.ndarray:
    import torch

    return _tensor(x).to(getattr(torch, TORCH_DTYPES[fmt])).view(torch.uint8).numpy()


def torch_adapter() -> Adapter:
    return Adapter("torch", _torch_encode, profile="torch", formats=tuple(TORCH_DTYPES),
                   sources=("float16", "bfloat16", "float32", "float64"), divergences=TORCH_DIVERGENCES)


def torch_decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Every code of an FP8/E8M0 format through PyTorch's cast to float32."""
    import torch

    t = torch.from_numpy(np.asarray(codes, dtype=np.uint8)).view(getattr(torch, TORCH_DTYPES[fmt]))
    return np.asarray(t.to(torch.float32).numpy())


class Torch(Implementation):
    name = "torch"
    summary = "PyTorch Tensor.to into float8_e4m3fn/e5m2/e4m3fnuz/e5m2fnuz/e8m0fnu (CPU)"
    requires = ("torch",)
    install = 'pip install "fmtsim[torch]"'
    capabilities = ("decode", "encode")
    profiles = ("torch",)
    checked_with = "torch 2.13.0 (CPU)"
    divergences = TORCH_DIVERGENCES

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("torch", torch_decode, tuple(TORCH_DTYPES))]

    def encoders(self, req: Request) -> list[Adapter]:
        return [torch_adapter()]


IMPLEMENTATIONS = [Torch()]
