"""``onnxruntime``: onnxruntime's CPU Cast kernels (graph optimisations off), opsets 21 to 25
(E8M0: 24 and 25), saturate=1 and saturate=0, from float16, bfloat16, float32 and float64.

Each batch is cast once per opset and the opsets must agree (a disagreement is a failed
batch); the result is held to fmtsim's ``onnxruntime_sat`` / ``onnxruntime_nosat``
profiles (DOUBLE sources round through float32 there: the profiles' intermediate type).
onnxruntime has no FP4/FP6 Cast kernel. Its bugs are the named divergences below.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Implementation, Request

TYPES = {"e4m3": "FLOAT8E4M3FN", "e5m2": "FLOAT8E5M2", "e4m3fnuz": "FLOAT8E4M3FNUZ",
         "e5m2fnuz": "FLOAT8E5M2FNUZ", "e8m0": "FLOAT8E8M0"}
SOURCES = {"float32": "FLOAT", "float16": "FLOAT16", "bfloat16": "BFLOAT16", "float64": "DOUBLE"}
OPSETS = (21, 22, 23, 24, 25)
_SESSIONS: dict[tuple[str, str, bool, int], Any] = {}


def _session(src: str, fmt: str, saturate: bool, opset: int) -> Any:
    key = (src, fmt, saturate, opset)
    if key not in _SESSIONS:
        import onnxruntime as ort
        from onnx import TensorProto, helper

        to = getattr(TensorProto, TYPES[fmt])
        node = helper.make_node("Cast", ["x"], ["y"], to=to, saturate=int(saturate))
        graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", getattr(TensorProto,
                                                                                           SOURCES[src]), [None])],
                                  [helper.make_tensor_value_info("y", to, [None])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 11 if opset >= 23 else 10
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        _SESSIONS[key] = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return _SESSIONS[key]


def _cast_once(x: np.ndarray, src: str, fmt: str, saturate: bool, opset: int) -> np.ndarray:
    import onnxruntime as ort
    from onnx import TensorProto

    sess = _session(src, fmt, saturate, opset)
    io = sess.io_binding()
    x = np.ascontiguousarray(x)
    if src == "bfloat16":  # numpy has no bfloat16 onnxruntime knows: hand it the bits, typed
        io.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy_with_onnx_type(x.view(np.uint16),
                                                                                  TensorProto.BFLOAT16))
    else:
        io.bind_cpu_input("x", x)
    io.bind_output("y", "cpu")
    sess.run_with_iobinding(io)
    out = io.get_outputs()[0]  # FP8 outputs have no numpy type: read the bytes
    if x.size == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * x.size).from_address(out.data_ptr())).copy()


def _source_name(x: np.ndarray) -> str:
    if x.dtype == ml_dtypes.bfloat16:
        return "bfloat16"
    return {np.dtype(np.float16): "float16", np.dtype(np.float32): "float32",
            np.dtype(np.float64): "float64"}[x.dtype]


def _cast(saturate: bool) -> Callable[[np.ndarray, str], np.ndarray]:
    def encode(x: np.ndarray, fmt: str) -> np.ndarray:
        src = _source_name(x)
        results = {op: _cast_once(x, src, fmt, saturate, op) for op in OPSETS if fmt != "e8m0" or op >= 24}
        first_op, first = next(iter(results.items()))
        for op, got in results.items():
            if not np.array_equal(got, first):
                i = int(np.argmax(got != first))
                raise RuntimeError(f"opset {op} and opset {first_op} differ on {x[i]!r}: "
                                   f"{int(got[i]):#x} vs {int(first[i]):#x}")
        return first
    return encode


def _abs32(x: np.ndarray) -> np.ndarray:
    # the kernel's float32 value: DOUBLE inputs are rounded to float32 first, other sources exactly
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(np.asarray(x).astype(np.float32).astype(np.float64))


ALL_SOURCES = tuple(SOURCES)
DIVERGENCES = (
    Divergence("onnxruntime.e4m3_nosat_480_to_496", "onnxruntime[saturate=0]", ("e4m3",), ALL_SOURCES,
               "onnxruntime 1.32 Cast to FLOAT8E4M3FN with saturate=0 gives +-448 (0x7E/0xFE) for "
               "480 <= |x| < 496; these round to 480 or 512, above the largest finite 448, so OFP8 "
               "requires NaN (values in (464, 480) are NaN there, as required).",
               lambda x, f: (_abs32(x) >= 480) & (_abs32(x) < 496)),
    Divergence("onnxruntime.e5m2_nosat_61440_to_65536", "onnxruntime[saturate=0]", ("e5m2",), ALL_SOURCES,
               "onnxruntime 1.32 Cast to FLOAT8E5M2 with saturate=0 gives NaN (0x7F/0xFF) for "
               "61440 <= |x| < 65536; these round to 65536, past the largest finite 57344, so "
               "OFP8 requires +-Inf (0x7C/0xFC), which it gives from 65536 on. (|x| of a DOUBLE input "
               "is its float32 rounding, as for the 480 band.)",
               lambda x, f: (_abs32(x) >= 61440) & (_abs32(x) < 65536)),
)


class Onnxruntime(Implementation):
    name = "onnxruntime"
    aliases = ("ort",)
    summary = "onnxruntime CPU Cast kernels, opsets 21-25, saturate=1 and saturate=0"
    requires = ("onnxruntime", "onnx")
    install = 'pip install "fmtsim[runtimes]"'
    capabilities = ("encode",)
    profiles = ("onnxruntime_sat", "onnxruntime_nosat")
    divergences = DIVERGENCES
    checked_with = "onnxruntime 1.32.0 (CPU)"

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter(f"onnxruntime[saturate={int(sat)}]", _cast(sat), profile=prof, formats=tuple(TYPES),
                        sources=ALL_SOURCES,
                        divergences=tuple(d for d in DIVERGENCES if d.implementation.endswith(f"={int(sat)}]")))
                for sat, prof in ((True, "onnxruntime_sat"), (False, "onnxruntime_nosat"))]


IMPLEMENTATIONS = [Onnxruntime()]
