"""``mmasim``: MMA-Sim's matrix-instruction models against fmtsim.mma, every named unit it has,
output bits (see conformance.mma_peers; ``--formats`` may name units to run only those)."""

from __future__ import annotations

from ..plugin import Implementation, Request
from ..rows import Row


class Mmasim(Implementation):
    name = "mmasim"
    summary = "MMA-Sim's matrix-instruction models (NVIDIA sm_89..sm_100, AMD CDNA3) against fmtsim.mma"
    requires = ("torch", "mmasim")
    imports = ("mmasim.amd", "mmasim.nv_ptx")
    install = 'pip install "fmtsim[mma]"'
    capabilities = ("gemm",)
    checked_with = "mmasim 2.1.1"

    def gemm_rows(self, req: Request) -> list[Row]:
        from ..mma_peers import mmasim_rows

        return mmasim_rows(None if req.units is None else list(req.units) or None, big=req.big)


IMPLEMENTATIONS = [Mmasim()]
