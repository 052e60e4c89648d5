"""``torchao``: torchao's FP4/FP6 bit casts and their decodes, its MX ``to_mx`` / ``to_dtype``
and its NVFP4 quantizer (see conformance.torch_peers), held to fmtsim's ``torchao`` profile
and to fmtsim.mx / fmtsim.nvfp4 block by block."""

from __future__ import annotations

from ..adapters import Adapter
from ..plugin import Decoder, Implementation, Request
from ..rows import Row
from ..torch_peers import TORCHAO_CASTS, torchao_adapter, torchao_block_rows, torchao_decode


class Torchao(Implementation):
    name = "torchao"
    summary = "torchao FP4/FP6 casts (mx_formats.kernels), MX to_mx, NVFP4 nvfp4_quantize"
    requires = ("torch", "torchao")
    imports = ("torchao.prototype.mx_formats.kernels", "torchao.prototype.mx_formats.mx_tensor",
               "torchao.prototype.mx_formats.nvfp4_tensor")
    install = 'pip install "fmtsim[torch]"'
    capabilities = ("decode", "encode", "block")
    profiles = ("torchao",)
    checked_with = "torchao 0.18.0 on torch 2.13.0 (CPU)"

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("torchao", torchao_decode, tuple(TORCHAO_CASTS))]

    def encoders(self, req: Request) -> list[Adapter]:
        return [torchao_adapter()]

    def block_rows(self, req: Request) -> list[Row]:
        return torchao_block_rows(None if req.schemes is None else list(req.schemes))


IMPLEMENTATIONS = [Torchao()]
