"""``torch``: PyTorch's FP8/E8M0 ``Tensor.to`` casts and their decodes (see conformance.torch_peers),
held to fmtsim's ``torch`` profile; its named divergences are ``torch.*``."""

from __future__ import annotations

from ..adapters import Adapter
from ..plugin import Decoder, Implementation, Request
from ..torch_peers import TORCH_DIVERGENCES, TORCH_DTYPES, torch_adapter, torch_decode


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
