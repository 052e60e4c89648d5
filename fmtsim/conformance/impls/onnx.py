"""``onnx``: the ONNX reference evaluator's Cast (``onnx.reference.ops.op_cast.cast_to``), every
target type the installed onnx has, saturate=1 and saturate=0 (E8M0 with round_mode "up"),
float32 input, held to fmtsim's ``onnx_reference_sat`` / ``onnx_reference_nosat`` profiles; its named
divergences are ``onnx.*``, below. (onnxruntime's kernels and the ONNX
Cast spec's own table are the implementations ``onnxruntime`` and ``onnx_spec``.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...formats import Format
from ..adapters import Adapter
from ..divergences import Divergence
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


def _onnx_e8m0(x: np.ndarray, fmt: Format) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        a = np.asarray(x, dtype=np.float64)
    return ((a <= 2.0**-127) | np.signbit(a)) & np.isfinite(a)


# this implementation's named divergences (its bugs, each with the exact inputs it concerns)
DIVERGENCES: tuple[Divergence, ...] = (
    Divergence(
        "onnx.e8m0_zero_and_negatives",
        "onnx",
        ("e8m0",),
        ("float32",),
        "The ONNX reference Cast to FLOAT8E8M0 (onnx 1.23) reads only the exponent bits: 0 "
        "becomes 0x00 and a finite negative x the code of |x| (the onnx_sat profile: NaN 0xFF, "
        "as ml_dtypes does); and a float32 subnormal, whose "
        "exponent field is 0, rounds up to 0x01 even at or below 2^-127 (fmtsim: 0x00).",
        _onnx_e8m0,
    ),
)


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
    divergences = DIVERGENCES

    def encoders(self, req: Request) -> list[Adapter]:
        import importlib.util

        formats = tuple(ONNX_TYPES)
        if importlib.util.find_spec("onnx") is not None:
            import onnx

            formats = tuple(f for f, t in ONNX_TYPES.items() if hasattr(onnx.TensorProto, t))
        return [Adapter(f"onnx[saturate={int(sat)}]", _cast(sat), profile=prof, formats=formats,
                        sources=("float32",), divergences=DIVERGENCES)
                for sat, prof in ((True, "onnx_reference_sat"), (False, "onnx_reference_nosat"))]


IMPLEMENTATIONS = [OnnxReference()]
