"""``onnx``: the ONNX reference evaluator's Cast (``onnx.reference.ops.op_cast.cast_to``), every
target type the installed onnx has, saturate=1 and saturate=0 (E8M0 with round_mode "up"),
float32 input, held to fmtsim's ``onnx_reference_sat`` / ``onnx_reference_nosat`` profiles; its named
divergences are ``onnx.*`` in conformance.divergences. (onnxruntime's kernels and the ONNX
Cast spec's own table are the implementations ``onnxruntime`` and ``onnx_spec``.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..adapters import Adapter
from ..divergences import DIVERGENCES
from ..plugin import Implementation, Request

ONNX_TYPES = {"e4m3": "FLOAT8E4M3FN", "e5m2": "FLOAT8E5M2", "e4m3fnuz": "FLOAT8E4M3FNUZ",
              "e5m2fnuz": "FLOAT8E5M2FNUZ", "e2m1": "FLOAT4E2M1", "e8m0": "FLOAT8E8M0"}


def _cast(saturate: bool) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        import onnx
        from onnx.reference.ops.op_cast import cast_to

        to = getattr(onnx.TensorProto, ONNX_TYPES[fmt])
        with np.errstate(invalid="ignore", over="ignore"):
            out = np.asarray(cast_to(np.ascontiguousarray(x), to, saturate, "up"))
        return out.view(np.uint8)
    return encode


class OnnxReference(Implementation):
    name = "onnx"
    aliases = ("onnx_reference",)
    summary = "the ONNX reference evaluator's Cast (onnx.reference), saturate=1 and saturate=0"
    requires = ("onnx",)
    imports = ("onnx.reference.ops.op_cast",)
    install = 'pip install "fmtsim[peers]"'
    capabilities = ("encode",)
    profiles = ("onnx_reference_sat", "onnx_reference_nosat")
    checked_with = "onnx 1.23"
    divergences = tuple(d for d in DIVERGENCES if d.implementation == "onnx")

    def encoders(self, req: Request) -> list[Adapter]:
        import importlib.util

        formats = tuple(ONNX_TYPES)
        if importlib.util.find_spec("onnx") is not None:
            import onnx

            formats = tuple(f for f, t in ONNX_TYPES.items() if hasattr(onnx.TensorProto, t))
        return [Adapter(f"onnx[saturate={int(sat)}]", _cast(sat), profile=prof, formats=formats,
                        sources=("float32",), divergences="onnx")
                for sat, prof in ((True, "onnx_reference_sat"), (False, "onnx_reference_nosat"))]


IMPLEMENTATIONS = [OnnxReference()]
