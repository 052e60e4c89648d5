"""``openvino``: OpenVINO's CPU plugin ``Convert`` (opset13.convert) from f32, f16 and bf16 into
f8e4m3, f8e5m2, f8e8m0 and f4e2m1, held to the variant of fmtsim's ``openvino`` profile for the
code path this CPU takes (``avx512_core_fp16`` where the CPU has AVX512-FP16, else
``reference``: see :mod:`fmtsim.profiles.openvino`); and ``Convert`` of every code back to f32.
No named divergence: every difference from a single rounding is modelled by the variant.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

import ml_dtypes
import numpy as np

from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Decoder, Implementation, Request

TYPES = {"e4m3": "f8e4m3", "e5m2": "f8e5m2", "e8m0": "f8e8m0", "e2m1": "f4e2m1"}
SOURCES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
_COMPILED: dict[tuple[str, str], Any] = {}


def _compiled(src: str, dst: str) -> Any:
    if (src, dst) not in _COMPILED:
        import openvino as ov
        import openvino.opset13 as ops

        p = ops.parameter([-1], getattr(ov.Type, src))
        model = ov.Model([ops.convert(p, getattr(ov.Type, dst))], [p])
        _COMPILED[(src, dst)] = ov.Core().compile_model(model, "CPU")
    return _COMPILED[(src, dst)]


def _run(x: np.ndarray, src: str, dst: str) -> np.ndarray:
    import openvino as ov

    x = np.ascontiguousarray(x)
    if x.size == 0:
        return np.zeros(0, np.uint8)
    req = _compiled(src, dst).create_infer_request()
    if src == "bf16":
        t = ov.Tensor(ov.Type.bf16, ov.Shape([x.size]))
        np.asarray(t.data).view(np.uint16)[:] = x.view(np.uint16)
        req.infer({0: t})
    else:
        req.infer({0: x})
    return np.asarray(req.get_output_tensor(0).data)


def _source(x: np.ndarray) -> str:
    if x.dtype == ml_dtypes.bfloat16:
        return "bf16"
    return {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16"}[x.dtype]


def _encode(x: np.ndarray, fmt: str) -> np.ndarray:
    out = _run(x, _source(x), TYPES[fmt]).view(np.uint8).reshape(-1)
    if fmt == "e2m1":  # two codes a byte, element 0 in the low nibble
        return np.stack([out & 0xF, out >> 4], axis=1).reshape(-1)[: x.size]
    return out[: x.size]


def _decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    import openvino as ov
    import openvino.opset13 as ops

    raw = np.asarray(codes, dtype=np.uint8)
    if fmt == "e2m1":
        raw = (raw[0::2] | (raw[1::2] << 4)).astype(np.uint8)
    key = (TYPES[fmt], f"f32:decode:{codes.size}")  # the model's input shape is static
    if key not in _COMPILED:
        p = ops.parameter([codes.size], getattr(ov.Type, TYPES[fmt]))
        _COMPILED[key] = ov.Core().compile_model(ov.Model([ops.convert(p, ov.Type.f32)], [p]), "CPU")
    req = _COMPILED[key].create_infer_request()
    t = ov.Tensor(getattr(ov.Type, TYPES[fmt]), ov.Shape([codes.size]))
    np.asarray(t.data).view(np.uint8).reshape(-1)[:] = raw
    req.infer({0: t})
    return np.asarray(req.get_output_tensor(0).data, dtype=np.float32).reshape(-1)


# OpenVINO's cpu_convert takes oneDNN's JIT FP8 emulation when oneDNN's mayiuse(avx512_core_fp16)
# holds: AVX-512 F/BW/VL/DQ (avx512_core) and AVX512-FP16; every other CPU converts element by element
_AVX512_CORE_FP16 = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_fp16"})


def code_path_for(arch: str, flags: Set[str]) -> str:
    """The FP8 code path OpenVINO's CPU plugin takes on a CPU of ``arch`` with ``flags``
    (/proc/cpuinfo names)."""
    if arch.lower() in ("x86_64", "amd64") and _AVX512_CORE_FP16 <= set(flags):
        return "avx512_core_fp16"
    return "reference"


# No named divergence: the differences from a single rounding that looked like a bug (the E5M2
# codes just below 2^-17, 2^-16 and 2^-15) are exactly the double rounding through float16 the
# profile models (checked on every float32 of both signs in [2^-19, 2^-14): 0 differences).
DIVERGENCES: tuple[Divergence, ...] = ()


class Openvino(Implementation):
    name = "openvino"
    summary = "OpenVINO CPU Convert to f8e4m3/f8e5m2/f8e8m0/f4e2m1 from f32/f16/bf16, and back"
    requires = ("openvino",)
    imports = ("openvino.opset13",)
    install = 'pip install "fmtsim[runtimes]"'
    capabilities = ("decode", "encode")
    profiles = ("openvino",)
    divergences = DIVERGENCES
    checked_with = "openvino 2026.4.1 (CPU plugin)"

    def code_path(self) -> str | None:
        """This CPU's FP8 code path; None where its instruction sets cannot be read."""
        from ..environment import cpu_info

        cpu = cpu_info()
        if any(cpu.features.get(f) is None for f in _AVX512_CORE_FP16):
            return None
        return code_path_for(cpu.arch, {f for f, on in cpu.features.items() if on})

    def decoders(self, req: Request) -> list[Decoder]:
        return [Decoder("openvino", _decode, tuple(TYPES))]

    def encoders(self, req: Request) -> list[Adapter]:
        from ...profiles import select

        # the variant of this CPU's code path (None: unknown, or a recorded description: the default)
        path = None if req.recorded else self.code_path()
        variant = select("openvino", None, path).variant if path is not None else None
        return [Adapter("openvino", _encode, profile="openvino", formats=tuple(TYPES), sources=tuple(SOURCES),
                        divergences=DIVERGENCES, variant=variant)]


IMPLEMENTATIONS = [Openvino()]
