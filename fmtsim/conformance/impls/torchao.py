"""``torchao``: torchao's FP4/FP6 bit casts and their decodes, its MX ``to_mx`` / ``to_dtype``
and its NVFP4 quantizer, held to fmtsim's ``torchao`` profile and to fmtsim.mx / fmtsim.nvfp4
block by block.

Its FP4/FP6 casts (prototype.mx_formats.kernels f32_to_f4_unpacked, f32_to_f6_e2m3_unpacked,
f32_to_f6_e3m2_unpacked; float32 input) against the ``torchao`` profile; MX ``to_mx`` for every
element format and scale mode against :func:`fmtsim.mx.quantize`; ``nvfp4_quantize`` against
:func:`fmtsim.nvfp4.quantize` with recipe ``torchao``. The known block-level differences are
named here (TORCHAO_BLOCK_DIVERGENCES).

Checked against torchao 0.18.0 on torch 2.13.0 (CPU) (``pip install "fmtsim[torch]"``). torch
and torchao are imported only when this implementation is asked for.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from ...layout import unpack_fp4
from ..adapters import Adapter
from ..plugin import Decoder, Implementation, Request
from ..rows import Row
from .torch import _tensor

TORCHAO_CASTS = {"e2m1": "f32_to_f4_unpacked", "e2m3": "f32_to_f6_e2m3_unpacked",
                 "e3m2": "f32_to_f6_e3m2_unpacked"}

# torchao's named block-level divergences (checked block by block in torchao_block_rows; the
# masks are computed there)
TORCHAO_BLOCK_DIVERGENCES = {
    "torchao.mx_inf_block_scale":
        "A block holding +-Inf (and no NaN): torchao reads the exponent field of amax = Inf "
        "(255) like any other, so the scale is 2^(128 - emax_elem) and the Inf elements clamp "
        "to +-max; fmtsim gives the block the NaN scale 0xFF (docs/rules.md §3).",
    "torchao.mx_min_scale_divisor":
        "Blocks whose scale byte is 0x00 (2^-127): torchao divides the elements by 2^-126 "
        "(it clamps the float32 scale to the smallest normal, see the comment in to_mx), so "
        "the stored codes are worth half the input; fmtsim divides by 2^-127.",
    "torchao.mx_nan_block_elements":
        "Blocks with the NaN scale 0xFF: torchao writes the element casts it computed, "
        "fmtsim writes 0. The block decodes to NaN either way.",
    "torchao.nvfp4_amax0_nan_bits":
        "NVFP4 with tensor amax 0: torchao's per-tensor scale is 0 and its block scales 0/0, "
        "whose bits are the CPU's default NaN (x86: scales 0xFF, element codes 0xC); fmtsim "
        "writes scales 0x7F and codes 0. The tensor decodes to NaN either way.",
}


def missing() -> str | None:
    """Why the torchao implementation cannot run here (None when it can)."""
    return Torchao().missing()


def _torchao_encode(x: np.ndarray, fmt: str) -> np.ndarray:
    from torchao.prototype.mx_formats import kernels

    return getattr(kernels, TORCHAO_CASTS[fmt])(_tensor(x.astype(np.float32, copy=False))).numpy()


def torchao_adapter() -> Adapter:
    return Adapter("torchao", _torchao_encode, profile="torchao", formats=tuple(TORCHAO_CASTS),
                   sources=("float32",), divergences=())


def torchao_decode(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Every code of an FP4/FP6 format through torchao's unpacked-to-float32 bit cast."""
    import torch
    from torchao.prototype.mx_formats import kernels

    to_f32 = TORCHAO_CASTS[fmt].replace("f32_to_", "").replace("_unpacked", "_unpacked_to_f32")
    return np.asarray(getattr(kernels, to_f32)(torch.from_numpy(np.asarray(codes, dtype=np.uint8))).numpy())


def torchao_block_rows(schemes: list[str] | None = None) -> list[Any]:
    """MX (every element format x scale mode, float32 and bfloat16 input) and NVFP4, block
    by block: a block passes when its scale byte and every element code equal fmtsim's.
    ``mx dequantize``: torchao's to_dtype against fmtsim's mx.dequantize on torchao's own
    codes and scales, every value bit-equal (or both NaN)."""
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    from torchao.prototype.mx_formats.mx_tensor import to_dtype, to_mx
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize, per_tensor_amax_to_scale

    from ... import mx, nvfp4
    from ..vectors import block_inputs

    elem_dtypes = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
                   "mxfp6_e2m3": DTYPE_FP6_E2M3, "mxfp6_e3m2": DTYPE_FP6_E3M2, "mxfp4": torch.float4_e2m1fn_x2}
    x32 = block_inputs(2)
    sources = {"float32": x32, "bfloat16": x32.astype(ml_dtypes.bfloat16)}
    rows: list[Any] = []
    for scheme, dt in elem_dtypes.items():
        if schemes is not None and scheme not in schemes:
            continue
        deq = Row("torchao", scheme, "mx dequantize")
        for rule in mx.SCALE_RULES:
            row = Row("torchao", scheme, f"block_mx {rule}")
            for src, x in sources.items():
                wide = x.astype(np.float32)
                has_nan = np.isnan(wide).any(axis=1)
                inf_block = np.isinf(wide).any(axis=1) & ~has_nan
                s, d = to_mx(_tensor(x), dt, 32, ScaleCalculationMode(rule))
                theirs_s = s.view(torch.uint8).numpy().reshape(-1)
                theirs_c = d.view(torch.uint8).numpy().reshape(x.shape[0], -1)
                if scheme == "mxfp4":
                    theirs_c = unpack_fp4(theirs_c)
                q = mx.quantize(x, scheme, scale_rule=rule)
                ours_s, ours_c = q.scales.reshape(-1), q.codes
                same_scale = theirs_s == ours_s
                ok = same_scale & np.all(theirs_c == ours_c, axis=1)
                known = {
                    "torchao.mx_inf_block_scale": inf_block,
                    "torchao.mx_min_scale_divisor": same_scale & (ours_s == 0),
                    "torchao.mx_nan_block_elements": same_scale & (ours_s == mx.E8M0_NAN),
                }

                def describe(i: int, ts: np.ndarray = theirs_s, os_: np.ndarray = ours_s, tc: np.ndarray = theirs_c,
                             oc: np.ndarray = ours_c, xs: np.ndarray = wide, src: str = src) -> str:
                    j = int(np.argmax(tc[i] != oc[i])) if ts[i] == os_[i] else 0
                    return (f"{src} block {i}: scale torchao {ts[i]:#04x}, fmtsim {os_[i]:#04x}; element {j} "
                            f"(input {xs[i, j]!r}) torchao {tc[i, j]:#x}, fmtsim {oc[i, j]:#x}")

                row.add(ok, known, describe)
                # torchao's own bytes through both decoders
                theirs_v = to_dtype(d, s, dt, 32, torch.float32).numpy().reshape(x.shape[0], -1)
                ours_v = mx.dequantize(mx.MXTensor(theirs_c, theirs_s.reshape(-1, 1), scheme, 1, 32, rule,
                                                   x.shape[1], x.shape), np.float32)
                same = (ours_v.view(np.uint32) == theirs_v.view(np.uint32)) | (np.isnan(ours_v) & np.isnan(theirs_v))

                def describe_deq(i: int, t: np.ndarray = theirs_v, o: np.ndarray = ours_v) -> str:
                    j = int(np.argmax(t[i].view(np.uint32) != o[i].view(np.uint32)))
                    return f"block {i} element {j}: torchao {t[i, j]!r}, fmtsim {o[i, j]!r}"

                deq.add(np.all(same, axis=1), {}, describe_deq)
            rows.append(row)
        rows.append(deq)
    if schemes is None or "nvfp4" in schemes:
        finite = x32.copy()
        finite[~np.isfinite(finite)] = 0.0  # NVFP4 refuses NaN/Inf
        row = Row("torchao", "nvfp4", "block_nvfp4 1x16")
        for xs in (finite, np.zeros((4, 32), np.float32), finite * np.float32(2.0**-100)):
            amax = torch.tensor(float(np.max(np.abs(xs))), dtype=torch.float32)
            s, d = nvfp4_quantize(torch.from_numpy(xs.copy()), 16, per_tensor_amax_to_scale(amax))
            theirs_s = s.view(torch.uint8).numpy().reshape(-1)
            theirs_c = unpack_fp4(d.view(torch.uint8).numpy().reshape(xs.shape[0], -1)).reshape(-1, 16)
            qn = nvfp4.quantize(xs, recipe="torchao")
            ours_s, ours_c = qn.scales.reshape(-1), qn.codes.reshape(-1, 16)
            ok = (theirs_s == ours_s) & np.all(theirs_c == ours_c, axis=1)
            amax0 = np.full(ok.shape, float(amax) == 0.0)

            def describe_nv(i: int, ts: np.ndarray = theirs_s, os_: np.ndarray = ours_s,
                            tc: np.ndarray = theirs_c, oc: np.ndarray = ours_c) -> str:
                return (f"block {i}: scale torchao {ts[i]:#04x}, fmtsim {os_[i]:#04x}; "
                        f"codes torchao {tc[i].tolist()}, fmtsim {oc[i].tolist()}")

            row.add(ok, {"torchao.nvfp4_amax0_nan_bits": amax0}, describe_nv)
        rows.append(row)
    return rows


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
