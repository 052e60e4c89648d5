"""``numkong``: NumKong's ``astype`` casts into float8_e4m3, float8_e5m2, float6_e2m3 and
float6_e3m2 (float32 input), on two paths that differ:

    numkong[simd]    the widest kernels the CPU has (AVX2/AVX-512 on x86); each batch is padded
                     to a multiple of 64 elements so that no element falls to a scalar tail
    numkong[serial]  every SIMD capability disabled (``disable_capability``), the portable
                     C loop; the capabilities are restored afterwards

held to fmtsim's ``numkong_simd`` / ``numkong_serial`` profiles; its bugs are the named
divergences below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..adapters import Adapter
from ..divergences import Divergence
from ..plugin import Implementation, Request

TYPES = {"e4m3": "float8_e4m3", "e5m2": "float8_e5m2", "e2m3": "float6_e2m3", "e3m2": "float6_e3m2"}
_PAD = 64


def _cast(x: np.ndarray, fmt: str) -> np.ndarray:
    import numkong

    nk: Any = numkong  # its stubs, where installed, type astype's dtype narrower than the names it takes

    n = x.size
    padded = np.zeros(-(-max(n, 1) // _PAD) * _PAD, np.float32)
    padded[:n] = x
    out = nk.astype(padded, TYPES[fmt])
    return np.frombuffer(memoryview(out).tobytes(), np.uint8)[:n].copy()


def _serial(fn: Callable[[np.ndarray, str], np.ndarray]) -> Callable[[np.ndarray, str], np.ndarray]:
    def run(x: np.ndarray, fmt: str) -> np.ndarray:
        import numkong as nk

        on = [c for c, v in nk.get_capabilities().items() if v and c != "serial"]
        for c in on:
            nk.disable_capability(c)
        try:
            return fn(x, fmt)
        finally:
            for c in on:
                nk.enable_capability(c)
    return run


def _abs64(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.abs(np.asarray(x, dtype=np.float64))


DIVERGENCES = (
    Divergence("numkong.simd_e5m2_73728_to_122880_nan", "numkong[simd]", ("e5m2",), ("float32",),
               "NumKong 7.8's x86 SIMD E5M2 cast gives NaN for 73728 < |x| < 122880 (fmtsim: +-Inf, "
               "as OFP8 requires without saturation and as NumKong's serial path gives); measured over "
               "every float32 in [2^15, 2^18) of both signs: exactly 73728 < |x| < 122880.",
               lambda x, f: (_abs64(x) > 73728) & (_abs64(x) < 122880)),
)


class Numkong(Implementation):
    name = "numkong"
    summary = "NumKong astype to float8_e4m3/e5m2 and float6_e2m3/e3m2, SIMD and serial paths"
    requires = ("numkong",)
    install = 'pip install "fmtsim[runtimes]"'
    capabilities = ("encode",)
    profiles = ("numkong_simd", "numkong_serial")
    divergences = DIVERGENCES
    checked_with = "numkong 7.8.6 (x86-64: AVX2, AVX-512)"

    def encoders(self, req: Request) -> list[Adapter]:
        return [Adapter("numkong[simd]", _cast, profile="numkong_simd", formats=tuple(TYPES),
                        sources=("float32",), divergences=DIVERGENCES),
                Adapter("numkong[serial]", _serial(_cast), profile="numkong_serial", formats=tuple(TYPES),
                        sources=("float32",), divergences=())]


IMPLEMENTATIONS = [Numkong()]
