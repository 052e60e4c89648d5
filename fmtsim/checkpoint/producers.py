"""Producer conventions: one declarative record per producer and scheme, and detection.

A record says, for one quantized layer ``L``, which tensors hold the codes and the
scales (name suffixes, dtypes), how the codes are packed, how scales broadcast over
the codes (``block``), what multiplies what (``global_scale``: a multiplier or a
divisor) and which config files mark a checkpoint of that producer. Every job
(inspect, dequantize, convert) reads these records; nothing about a producer is
written anywhere else.

What each record was checked against (the producer's own loader or exporter):

- DeepSeek-V3 block FP8: deepseek-ai/DeepSeek-V3 ``inference/fp8_cast_bf16.py`` reads every
  1-byte tensor ``W`` with ``W_scale_inv`` and calls ``weight_dequant(W, scale_inv)``
  (a product, 128x128 blocks: ``inference/kernel.py``), then drops the ``_scale_inv``
  entries from the index.
- gpt-oss MXFP4: openai/gpt-oss ``gpt_oss/torch/weights.py``: ``*.blocks`` U8 [..., G, 16] and
  ``*.scales`` U8 [..., G]; nibble ``b & 0x0F`` is element 2i, ``b >> 4`` element 2i+1; value
  ``ldexp(FP4_VALUES[nibble], scale - 127)``; output reshaped to [..., G * 32]. The Hugging Face
  release names them ``*_proj_blocks`` / ``*_proj_scales`` (quant_method ``mxfp4``).
- compressed-tensors NVFP4: neuralmagic/compressed-tensors
  ``compressors/quantized_compressors/nvfp4_quantized.py``: ``weight_packed`` U8 [m, n/2],
  ``pack_fp4_to_uint8`` puts element 2i in the low nibble; ``decompress_weight`` dequantizes with
  ``weight_scale`` and ``weight_global_scale``, and the shared ``dequantize`` divides the block
  scale by the global scale (``scale = scale / global_scale``): a divisor.
- compressed-tensors W4A16 (pack-quantized): ``compressors/quantized_compressors/pack_quantized.py``:
  ``pack_to_int32`` adds 8 to each int4 and packs eight per int32 along dim 1, element i at bits
  4i; ``weight_shape`` holds the unpacked shape; an asymmetric zero point is packed along dim 0.
- ModelOpt NVFP4: a copy of vLLM's ModelOpt NVFP4 linear method (``quantization/modelopt.py``,
  read through a code index, repository not named there): ``process_weights_after_loading`` keeps
  ``weight_scale_2.max()`` over fused shards and sets ``alpha = input_scale * weight_scale_2`` (a
  multiplier), asserts ``weight_scale`` is F8_E4M3 with 16 values per scale, and swizzles it
  only after loading (the checkpoint stores it plain). That ``max()`` over fused shards is why
  differing gate/up or q/k/v global scales are a lint finding.
- ModelOpt / Quark / FBGEMM / TensorRT-LLM / Mistral FP8 (``w = q * s``), Quark MXFP4 and the MXFP8
  record: layouts as the vLLM ``quantization/{modelopt,quark,fbgemm_fp8}.py`` loaders are
  documented; not re-read in source for this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Producer", "PRODUCERS", "get_producer", "LayerMatch", "Detection", "detect", "read_configs"]


@dataclass(frozen=True)
class Producer:
    """One producer's layout of one quantized layer ``L`` (see the module docstring)."""

    name: str
    title: str
    scheme: str  # fp8 | nvfp4 | mxfp4 | w4a16
    codes: str  # suffix appended to L
    codes_dtypes: tuple[str, ...]
    scale: str
    scale_dtypes: tuple[str, ...]
    element: str  # fmtsim format of the elements
    scale_format: str  # 'float' (stored float), 'ue4m3', 'e8m0'
    packing: str  # 'byte' (one code per byte), 'fp4' (two per byte, low nibble first), 'int4x8' (eight per I32)
    block: tuple[int, int] | None  # (rows, cols) one scale covers; None: from the scale's shape
    global_scale: str | None = None  # suffix of a per-tensor second-level scale
    global_direction: str | None = None  # 'multiplier' | 'divisor'
    zero_point: str | None = None
    shape_tensor: str | None = None
    extra: tuple[str, ...] = ()  # other suffixes of L this producer writes (activation / KV scales)
    config: tuple[tuple[str, str, str], ...] = ()  # (file, dotted key, value) markers
    value: str = ""  # the dequantization rule, for people
    # where the producer writes the block shape of 2-D block scales: (file, dotted key); a '*' key
    # part is every entry of that object (compressed-tensors' config_groups); read before ``block``
    block_keys: tuple[tuple[str, str], ...] = ()


PRODUCERS: tuple[Producer, ...] = (
    Producer("deepseek-fp8-block", "DeepSeek-V3/R1, Qwen3-FP8 128x128 block FP8", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale_inv", ("F32", "BF16"), "e4m3", "float", "byte", (128, 128),
             config=(("config.json", "quantization_config.quant_method", "fp8"),),
             value="w = q * s_block (despite 'inv'); blocks of 128x128",
             block_keys=(("config.json", "quantization_config.weight_block_size"),)),
    Producer("modelopt-fp8", "NVIDIA ModelOpt FP8", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale", ("F32",), "e4m3", "float", "byte", None,
             extra=(".input_scale", ".k_scale", ".v_scale"),
             config=(("hf_quant_config.json", "quantization.quant_algo", "FP8"),
                     ("config.json", "quantization_config.quant_method", "modelopt")),
             value="w = q * s (per tensor)"),
    Producer("compressed-tensors-fp8", "compressed-tensors / llm-compressor FP8 (float-quantized)", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale", ("F32", "BF16", "F16"), "e4m3", "float", "byte", None,
             extra=(".input_scale",),
             config=(("config.json", "quantization_config.format", "float-quantized"),
                     ("config.json", "quantization_config.quant_method", "compressed-tensors")),
             value="w = q * s (per tensor [1], per channel [out, 1] or per block: FP8_BLOCK)",
             block_keys=(("config.json", "quantization_config.config_groups.*.weights.block_structure"),)),
    Producer("fbgemm-fp8", "FBGEMM FP8 rowwise", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale", ("F32", "BF16"), "e4m3", "float", "byte", None,
             extra=(".input_scale_ub",),
             config=(("config.json", "quantization_config.quant_method", "fbgemm_fp8"),),
             value="w = q * s (per row [out, 1]); input_scale_ub is a bound, not a scale"),
    Producer("quark-fp8", "AMD Quark FP8", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale", ("F32", "BF16"), "e4m3", "float", "byte", None,
             extra=(".input_scale", ".output_scale"),
             config=(("config.json", "quantization_config.quant_method", "quark"),),
             value="w = q * s"),
    Producer("trtllm-fp8", "TensorRT-LLM FP8", "fp8",
             ".weight", ("F8_E4M3",), ".weights_scaling_factor", ("F32",), "e4m3", "float", "byte", None,
             extra=(".activation_scaling_factor",),
             config=(("config.json", "quantization.quant_algo", "FP8"),),
             value="w = q * s"),
    Producer("mistral-fp8", "Mistral consolidated FP8", "fp8",
             ".weight", ("F8_E4M3",), ".qscale_weight", ("F32", "BF16"), "e4m3", "float", "byte", None,
             extra=(".qscale_act",),
             config=(("params.json", "quantization.qformat_weight", "fp8_e4m3"),),
             value="w = q * s"),
    Producer("modelopt-nvfp4", "NVIDIA ModelOpt NVFP4", "nvfp4",
             ".weight", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", (1, 16),
             # AMD Quark's NVFP4 export has this layout too and adds the activations' second-level input_scale_2
             global_scale=".weight_scale_2", global_direction="multiplier", extra=(".input_scale", ".input_scale_2"),
             config=(("hf_quant_config.json", "quantization.quant_algo", "NVFP4"),
                     ("config.json", "quantization_config.quant_algo", "NVFP4")),
             value="w = e2m1 * s_block * weight_scale_2"),
    Producer("compressed-tensors-nvfp4", "compressed-tensors NVFP4 (nvfp4-pack-quantized)", "nvfp4",
             ".weight_packed", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", (1, 16),
             global_scale=".weight_global_scale", global_direction="divisor", extra=(".input_global_scale",),
             config=(("config.json", "quantization_config.format", "nvfp4-pack-quantized"),),
             value="w = e2m1 * s_block / weight_global_scale"),
    Producer("gpt-oss-mxfp4", "gpt-oss MXFP4 experts (Hugging Face names)", "mxfp4",
             "_blocks", ("U8",), "_scales", ("U8",), "e2m1", "e8m0", "fp4", (1, 32),
             config=(("config.json", "quantization_config.quant_method", "mxfp4"),),
             value="w = e2m1 * 2^(scale - 127); [..., G, 16] bytes -> [..., G * 32] values"),
    Producer("gpt-oss-mxfp4-orig", "gpt-oss MXFP4 experts (original release names)", "mxfp4",
             ".blocks", ("U8",), ".scales", ("U8",), "e2m1", "e8m0", "fp4", (1, 32),
             value="w = e2m1 * 2^(scale - 127); [..., G, 16] bytes -> [..., G * 32] values"),
    Producer("quark-mxfp4", "AMD Quark MXFP4", "mxfp4",
             ".weight", ("U8",), ".weight_scale", ("U8",), "e2m1", "e8m0", "fp4", (1, 32),
             extra=(".input_scale", ".output_scale"),
             config=(("config.json", "quantization_config.quant_method", "quark"),),
             value="w = e2m1 * 2^(scale - 127); [out, in/2] bytes, [out, in/32] scales"),
    Producer("modelopt-mxfp8", "MXFP8 (E4M3 elements, E8M0 scales per 32; as fmtsim writes it)", "fp8",
             ".weight", ("F8_E4M3",), ".weight_scale", ("U8",), "e4m3", "e8m0", "byte", (1, 32),
             config=(("hf_quant_config.json", "quantization.quant_algo", "MXFP8"),),
             value="w = q * 2^(scale - 127), 32 values per scale"),
    Producer("compressed-tensors-w4a16", "compressed-tensors W4A16 (pack-quantized)", "w4a16",
             ".weight_packed", ("I32",), ".weight_scale", ("BF16", "F16", "F32"), "int4", "float", "int4x8", None,
             zero_point=".weight_zero_point", shape_tensor=".weight_shape",
             config=(("config.json", "quantization_config.format", "pack-quantized"),),
             value="w = (q - zero_point) * s_group; eight int4 (+8) per int32, element i at bits 4i"),
)


def get_producer(name: str) -> Producer:
    for p in PRODUCERS:
        if p.name == name:
            return p
    raise ValueError(f"unknown producer {name!r}; choose from {', '.join(p.name for p in PRODUCERS)}")


def _lookup(obj: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def read_configs(directory: Path | None) -> dict[str, Any]:
    """The JSON config files a producer may mark (config.json, hf_quant_config.json, params.json)."""
    out: dict[str, Any] = {}
    if directory is None:
        return out
    for name in ("config.json", "hf_quant_config.json", "params.json"):
        p = directory / name
        if p.is_file():
            try:
                out[name] = json.loads(p.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                out[name] = None
    return out


def config_matches(p: Producer, configs: dict[str, Any]) -> bool:
    for file, key, value in p.config:
        got = _lookup(configs.get(file), key)
        if isinstance(got, str) and got.lower() == value.lower():
            return True
    return False


@dataclass
class LayerMatch:
    """One quantized tensor: its layer prefix, the producer record chosen, and the tensor names."""

    layer: str
    producer: Producer
    codes: str
    scale: str
    global_scale: str | None = None
    zero_point: str | None = None
    shape_tensor: str | None = None
    candidates: tuple[str, ...] = ()  # every record that fits the tensor names and dtypes


@dataclass
class Detection:
    layers: dict[str, LayerMatch]  # codes tensor name -> match
    ambiguous: dict[str, tuple[str, ...]]  # codes tensor -> records that fit with different rules
    producers: dict[str, int]  # producer name -> layers
    config_producers: tuple[str, ...]  # records a config file names


def _fits(p: Producer, layer: str, dtypes: dict[str, str]) -> bool:
    if dtypes.get(layer + p.codes) not in p.codes_dtypes or dtypes.get(layer + p.scale) not in p.scale_dtypes:
        return False
    return p.global_scale is None or layer + p.global_scale in dtypes


def _rule(p: Producer) -> tuple[Any, ...]:
    """What dequantization does; records with equal rules may be confused harmlessly."""
    return (p.scheme, p.codes, p.scale, p.element, p.scale_format, p.packing, p.block, p.global_scale,
            p.global_direction)


def detect(dtypes: dict[str, str], configs: dict[str, Any], producer: str | None = None) -> Detection:
    """Match every tensor against the records. A config marker picks among records that fit;
    records that fit with different rules and no marker to choose are reported as ambiguous,
    never guessed. ``producer`` forces one record."""
    forced = get_producer(producer) if producer else None
    marked = tuple(p.name for p in PRODUCERS if config_matches(p, configs))
    layers: dict[str, LayerMatch] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    records = (forced,) if forced else PRODUCERS
    for name in sorted(dtypes):
        fits = []
        for p in records:
            if name.endswith(p.codes):
                layer = name[: -len(p.codes)]
                if _fits(p, layer, dtypes):
                    fits.append(p)
        if not fits:
            continue
        chosen = [p for p in fits if p.name in marked] or fits
        rules = {_rule(p) for p in chosen}
        if len(rules) > 1:
            ambiguous[name] = tuple(p.name for p in chosen)
            continue
        best = chosen[0]
        layer = name[: -len(best.codes)]
        layers[name] = LayerMatch(
            layer, best, name, layer + best.scale,
            layer + best.global_scale if best.global_scale else None,
            layer + best.zero_point if best.zero_point and layer + best.zero_point in dtypes else None,
            layer + best.shape_tensor if best.shape_tensor and layer + best.shape_tensor in dtypes else None,
            tuple(p.name for p in fits))
    count: dict[str, int] = {}
    for m in layers.values():
        count[m.producer.name] = count.get(m.producer.name, 0) + 1
    return Detection(layers, ambiguous, count, marked)
