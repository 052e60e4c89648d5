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
  0.19's ``pack_quantized/helpers.py`` packs any width of 1..8 bits densely (element i at bit i*b of
  the row's little-endian bit string, offset 2^(b-1)): W8A16 is four int8 + 128 per int32; the width
  is only in the config (``config_groups.*.weights.num_bits``), so its record needs that marker.
- ModelOpt NVFP4: a copy of vLLM's ModelOpt NVFP4 linear method (``quantization/modelopt.py``,
  read through a code index, repository not named there): ``process_weights_after_loading`` keeps
  ``weight_scale_2.max()`` over fused shards and sets ``alpha = input_scale * weight_scale_2`` (a
  multiplier), asserts ``weight_scale`` is F8_E4M3 with 16 values per scale, and swizzles it
  only after loading (the checkpoint stores it plain). That ``max()`` over fused shards is why
  differing gate/up or q/k/v global scales are a lint finding.
- compressed-tensors 0.19 MXFP4 / MXFP8: ``compressors/mxfp4/base.py`` (``MXFP4PackedCompressor``: the
  NVFP4 packing, ``weight_packed`` + ``weight_scale``, no global scale) and ``compressors/mx_utils.py``
  (``compress_mx_scale``: E8M0 byte ``127 + floor(log2(scale))``); int8 W8A8 is ``int-quantized``
  (``compressors/naive_quantized/base.py``: ``weight`` cast to int8, ``weight_scale`` [out, 1]).
- ModelOpt 0.47 (``torch/export/quant_utils.py``): ``pack_int4_in_uint8`` (W4A16_AWQ: transposed to
  [in, out/2, 2], ``val0 | val1 << 4``, back to [out/2, in]: rows 2r / 2r+1 in the low / high nibble,
  ``clamp(-8, 7)``); ``to_quantized_weight`` (int8: ``round().clamp(-128, 127)`` of ``w / s[:, None]``;
  FP8_PB_WO: ``FP8QTensor.quantize`` with 128x128 blocks, the preset
  ``configs/ptq/presets/model/fp8_2d_blockwise_weight_only``); ``get_weight_scaling_factor`` (MXFP4 and
  W4A8_MXFP4_FP8: ``MXFP4QTensor``); the ``quant_algo`` names (``W4A16_AWQ``, ``W8A8_SQ_PER_CHANNEL``,
  ``W8A16``, ``W4A16_NVFP4``, ``fp8_pb_wo``, ``mxfp4``, ...) from its per-layer config builder. AWQ and
  SmoothQuant write ``pre_quant_scale`` [in], a multiplier of the input; on the CPU runs AWQ folded it
  into the preceding norm instead.
- Quark 0.13 ``torch/utils/pack.py`` (``Pack_4_bits.pack``): transposed, eight values per int32 with
  ``order_map = [0, 2, 4, 6, 1, 3, 5, 7]`` (nibble i holds value ``order_map[i]``), int4 masked to four
  bits (two's complement), uint4 not; the zero point is packed the same way; the config names the
  weight dtype in ``global_quant_config.weight.dtype`` (``fp8_e4m3``, ``fp4``, ``int4``, ``uint4``, ``int8``).
- Every record above marked with ``writers`` was read back from checkpoints the library itself wrote
  (tests/fixtures/producers, tools/gen_producer_fixtures.py).
- ModelOpt / Quark / FBGEMM / TensorRT-LLM / Mistral FP8 (``w = q * s``), Quark MXFP4 and the MXFP8
  record: layouts as the vLLM ``quantization/{modelopt,quark,fbgemm_fp8}.py`` loaders are
  documented; not re-read in source for this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Producer", "PRODUCERS", "get_producer", "unread_layout", "LayerMatch", "Detection", "detect",
           "read_configs"]


@dataclass(frozen=True)
class Producer:
    """One producer's layout of one quantized layer ``L`` (see the module docstring)."""

    name: str
    title: str
    scheme: str  # fp8 | nvfp4 | mxfp4 | w4a16 (int4 weights) | w8a16 (packed int8 weights) | int8 | bnb4 | bnb8
    codes: str  # suffix appended to L
    codes_dtypes: tuple[str, ...]
    scale: str
    scale_dtypes: tuple[str, ...]
    element: str  # fmtsim format of the elements
    scale_format: str  # 'float' (stored float), 'ue4m3', 'e8m0'
    # 'byte' (one code per byte; I8: two's complement), 'fp4' (two per byte, low nibble first),
    # 'int4x8' / 'int8x4' (eight / four per I32 along a row, +8 / +128 offset), 'int4-rows' (U8 [out/2, in]:
    # rows 2r / 2r+1 in the low / high nibble, two's complement), 'int4x8-reorder-t' (I32 [in, out/8]:
    # stored transposed, nibbles 0,2,4,6,1,3,5,7 of eight outputs, two's complement; scales [in/group, out])
    packing: str
    block: tuple[int, int] | None  # (rows, cols) one scale covers; None: from the scale's shape
    global_scale: str | None = None  # suffix of a per-tensor second-level scale
    global_direction: str | None = None  # 'multiplier' | 'divisor'
    zero_point: str | None = None
    shape_tensor: str | None = None
    extra: tuple[str, ...] = ()  # other suffixes of L this producer writes (activation / KV scales)
    # config markers: any one alternative marks the checkpoint; an alternative is one (file, dotted key,
    # value) condition or a tuple of conditions that must all hold; '*' in a key matches any dict entry
    config: tuple[Any, ...] = ()
    value: str = ""  # the dequantization rule, for people
    # where the producer writes the block shape of 2-D block scales: (file, dotted key); a '*' key
    # part is every entry of that object (compressed-tensors' config_groups); read before ``block``
    block_keys: tuple[tuple[str, str], ...] = ()
    pre_scale: str | None = None  # suffix of a per-input-column multiplier of the input (AWQ), folded in
    writers: tuple[str, ...] = ()  # libraries known to write this layout (with the version checked)
    # only with its config marker (its tensors look like another record's; shapes, which detection does
    # not read, would tell them apart: ModelOpt's W4A16_NVFP4 looks like its W4A4 NVFP4)
    marker_required: bool = False
    # a layout known and named but not read: dequantize, convert and explain refuse it with this reason
    refuse: str = ""
    # tools/gen_checkpoints.py writes this layout with fmtsim's recipes (False: only the library's own
    # fixtures hold it, where the layout needs what a synthetic checkpoint cannot give: quanto's shapes
    # from a model config, HQQ's metadata tensors, torchao's safetensors metadata)
    synthetic: bool = True
    # records this one is a more specific case of: when its config marker holds, theirs is set aside
    overrides: tuple[str, ...] = ()
    # the element format each codes dtype stands for, where the dtype tag chooses it (an FP8 record reads
    # OCP F8_E4M3 and AMD's FNUZ F8_E4M3FNUZ alike: the same names and layout, the bits worth half and
    # every scale twice as large); a dtype not listed means ``element``
    dtype_elements: tuple[tuple[str, str], ...] = ()

    def element_of(self, codes_dtype: str) -> str:
        """The element format of codes stored as ``codes_dtype`` (a safetensors dtype tag)."""
        return dict(self.dtype_elements).get(codes_dtype, self.element)


CT = ("llm-compressor 0.14 / compressed-tensors 0.19",)
MODELOPT = ("nvidia-modelopt 0.47 export_hf_checkpoint",)
QUARK = ("amd-quark 0.13 export_safetensors",)
# FP8 codes as OCP (every producer writes these) or as AMD FNUZ (``fmtsim fnuz convert``'s output, and what a
# ROCm runtime holds after normalising an OCP checkpoint: bits kept but -0, scales doubled)
FP8_CODES = ("F8_E4M3", "F8_E4M3FNUZ")
FP8_ELEMENTS = (("F8_E4M3", "e4m3"), ("F8_E4M3FNUZ", "e4m3fnuz"))


def _ct_format(fmt: str) -> tuple[Any, ...]:
    """compressed-tensors names its format at the top of quantization_config, or per config group when
    the groups differ ('mixed-precision')."""
    return (("config.json", "quantization_config.format", fmt),
            ("config.json", "quantization_config.config_groups.*.format", fmt))


def _ct_pack(bits: int) -> tuple[Any, ...]:
    """compressed-tensors pack-quantized with integer weights of ``bits``: the tensors' names and dtypes
    are the same for every width, so the config group that declares the width marks the record
    (a config group: its own format, or the top-level one when every group shares it)."""
    weights = {"weights": {"num_bits": bits, "type": "int"}}
    return ((("config.json", "quantization_config.format", "pack-quantized"),
             ("config.json", "quantization_config.config_groups.*", weights)),
            ("config.json", "quantization_config.config_groups.*", {"format": "pack-quantized", **weights}))


def _modelopt(*algos: str) -> tuple[Any, ...]:
    return tuple((f, k, a) for a in algos for f, k in (("hf_quant_config.json", "quantization.quant_algo"),
                                                       ("config.json", "quantization_config.quant_algo")))


def _quark(*dtypes: str, **also: str) -> tuple[Any, ...]:
    """Quark declares the weight spec (dtype, group size, ...) per model (global_quant_config) or per
    layer pattern (layer_quant_config); a two-level scheme lists two specs, each matched whole."""
    return tuple((("config.json", "quantization_config.quant_method", "quark"),
                  ("config.json", where, {"dtype": d, **also}))
                 for d in dtypes for where in ("quantization_config.global_quant_config.weight",
                                               "quantization_config.layer_quant_config.*.weight"))


def _quark_all(*specs: dict[str, str]) -> tuple[Any, ...]:
    """Quark's weight specs, all present (a two-level scheme lists the element spec and the scale's)."""
    return tuple((("config.json", "quantization_config.quant_method", "quark"),
                  *(("config.json", where, spec) for spec in specs))
                 for where in ("quantization_config.global_quant_config.weight",
                               "quantization_config.layer_quant_config.*.weight"))


PRODUCERS: tuple[Producer, ...] = (
    Producer("deepseek-fp8-block", "DeepSeek-V3/R1, Qwen3-FP8 128x128 block FP8", "fp8",
             ".weight", FP8_CODES, ".weight_scale_inv", ("F32", "BF16"), "e4m3", "float", "byte", (128, 128),
             dtype_elements=FP8_ELEMENTS,
             config=(("config.json", "quantization_config.quant_method", "fp8"),),
             value="w = q * s_block (despite 'inv'); blocks of 128x128",
             block_keys=(("config.json", "quantization_config.weight_block_size"),)),
    Producer("modelopt-fp8", "NVIDIA ModelOpt FP8", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("F32",), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".input_scale", ".k_scale", ".v_scale"),
             config=_modelopt("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"),
             value="w = q * s (per tensor [], per channel [out, 1], or 2-D blocks [out/128, 1, in/128, 1])",
             writers=MODELOPT),
    Producer("compressed-tensors-fp8", "compressed-tensors / llm-compressor FP8 (float-quantized)", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("F32", "BF16", "F16"), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".input_scale",),
             config=_ct_format("float-quantized"),
             value="w = q * s (per tensor [1], per channel [out, 1], or blocks: block_structure in the config)",
             writers=CT,
             block_keys=(("config.json", "quantization_config.config_groups.*.weights.block_structure"),)),
    Producer("fbgemm-fp8", "FBGEMM FP8 rowwise", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("F32", "BF16"), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".input_scale_ub",),
             config=(("config.json", "quantization_config.quant_method", "fbgemm_fp8"),),
             value="w = q * s (per row [out, 1]); input_scale_ub is a bound, not a scale"),
    Producer("quark-fp8", "AMD Quark FP8", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("F32", "BF16"), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".input_scale", ".output_scale"),
             config=_quark("fp8_e4m3", is_scale_quant="false"),
             value="w = q * s", writers=QUARK),
    Producer("trtllm-fp8", "TensorRT-LLM FP8", "fp8",
             ".weight", FP8_CODES, ".weights_scaling_factor", ("F32",), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".activation_scaling_factor",),
             config=(("config.json", "quantization.quant_algo", "FP8"),),
             value="w = q * s"),
    Producer("mistral-fp8", "Mistral consolidated FP8", "fp8",
             ".weight", FP8_CODES, ".qscale_weight", ("F32", "BF16"), "e4m3", "float", "byte", None,
             dtype_elements=FP8_ELEMENTS,
             extra=(".qscale_act",),
             config=(("params.json", "quantization.qformat_weight", "fp8_e4m3"),),
             value="w = q * s"),
    Producer("modelopt-nvfp4", "NVIDIA ModelOpt NVFP4", "nvfp4",
             ".weight", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", (1, 16),
             # AMD Quark's NVFP4 export has this layout too and adds the activations' second-level input_scale_2
             global_scale=".weight_scale_2", global_direction="multiplier", extra=(".input_scale", ".input_scale_2"),
             config=_modelopt("NVFP4", "NVFP4_AWQ"),
             value="w = e2m1 * s_block * weight_scale_2", writers=MODELOPT),
    Producer("compressed-tensors-nvfp4", "compressed-tensors NVFP4 (nvfp4-pack-quantized)", "nvfp4",
             ".weight_packed", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", (1, 16),
             global_scale=".weight_global_scale", global_direction="divisor", extra=(".input_global_scale",),
             config=_ct_format("nvfp4-pack-quantized"),
             value="w = e2m1 * s_block / weight_global_scale", writers=CT),
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
             config=_quark("fp4", group_size="32", scale_format="e8m0"),
             value="w = e2m1 * 2^(scale - 127); [out, in/2] bytes, [out, in/32] scales", writers=QUARK),
    Producer("modelopt-mxfp4", "NVIDIA ModelOpt MXFP4 (the layout Quark MXFP4 writes too)", "mxfp4",
             ".weight", ("U8",), ".weight_scale", ("U8",), "e2m1", "e8m0", "fp4", (1, 32),
             config=_modelopt("MXFP4", "W4A8_MXFP4_FP8"),
             value="w = e2m1 * 2^(scale - 127); [out, in/2] bytes, [out, in/32] scales", writers=MODELOPT),
    Producer("compressed-tensors-mxfp4", "compressed-tensors MXFP4 (mxfp4-pack-quantized)", "mxfp4",
             ".weight_packed", ("U8",), ".weight_scale", ("U8",), "e2m1", "e8m0", "fp4", (1, 32),
             config=_ct_format("mxfp4-pack-quantized"),
             value="w = e2m1 * 2^(scale - 127); [out, in/2] bytes, [out, in/32] scales", writers=CT),
    Producer("modelopt-mxfp8", "NVIDIA ModelOpt MXFP8 (E4M3 elements, E8M0 scales per 32)", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("U8",), "e4m3", "e8m0", "byte", (1, 32),
             dtype_elements=FP8_ELEMENTS,
             config=_modelopt("MXFP8"),
             value="w = q * 2^(scale - 127), 32 values per scale", writers=MODELOPT),
    Producer("compressed-tensors-mxfp8", "compressed-tensors MXFP8 (mxfp8-quantized; ModelOpt's layout)", "fp8",
             ".weight", FP8_CODES, ".weight_scale", ("U8",), "e4m3", "e8m0", "byte", (1, 32),
             dtype_elements=FP8_ELEMENTS,
             config=_ct_format("mxfp8-quantized"),
             value="w = q * 2^(scale - 127), 32 values per scale", writers=CT),
    Producer("quark-nvfp4", "AMD Quark NVFP4 (ModelOpt's layout)", "nvfp4",
             ".weight", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", (1, 16),
             global_scale=".weight_scale_2", global_direction="multiplier",
             extra=(".input_scale", ".input_scale_2"),
             config=_quark_all({"dtype": "fp4", "group_size": "16"}, {"dtype": "fp8_e4m3", "is_scale_quant": "true"}),
             value="w = e2m1 * s_block * weight_scale_2", writers=QUARK),
    # Quark 0.13 amdfp4 schemes: FP4 elements with UE5M3 block scales (``scale_format: e5m3``, 16 or 32 values
    # per scale), or float block scales quantized to UE5M3 under a per-tensor F32 multiplier (``*_global*``:
    # a second weight spec ``fp8_e5m3`` with ``is_scale_quant``); ``export/nn/modules/realquantizer.py``
    # dequantizes the scale byte with ``kernel/float8_e5m3`` and multiplies
    Producer("quark-amdfp4", "AMD Quark amdfp4 (FP4, UE5M3 block scales)", "nvfp4",
             ".weight", ("U8",), ".weight_scale", ("U8",), "e2m1", "ue5m3", "fp4", None,
             extra=(".input_scale", ".output_scale"), config=_quark("fp4", scale_format="e5m3"),
             value="w = e2m1 * ue5m3(s_block); [out, in/2] bytes, [out, in/group] scales", writers=QUARK,
             marker_required=True),
    Producer("quark-amdfp4-global", "AMD Quark amdfp4_global (FP4, UE5M3-quantized block scales, F32 global scale)",
             "nvfp4", ".weight", ("U8",), ".weight_scale", ("U8",), "e2m1", "ue5m3", "fp4", None,
             global_scale=".weight_scale_2", global_direction="multiplier", extra=(".input_scale", ".input_scale_2"),
             config=_quark_all({"dtype": "fp4"}, {"dtype": "fp8_e5m3", "is_scale_quant": "true"}),
             value="lost: each scale byte is the integer part of the block scale amax / (6 * weight_scale_2), "
                   "up to 114688, modulo 256 (a float -> uint8 cast, not its UE5M3 code)",
             writers=QUARK, marker_required=True,
             refuse="the block scales are not in the file: Quark 0.13 wrote each one's integer part modulo 256 (a "
                    "float -> uint8 cast of a value up to 114688, not its UE5M3 code), so no reader can recover "
                    "them; Quark's own import of this export fails too ('dequantize_float8_e5m3_v2 expected "
                    "uint8 input')"),
    # Quark 0.13 int4_fp8: the weight quantized to FP8 per tensor, then to int4 per output channel; Quark's
    # own import dequantizes float32((q - zp) * weight_scale_2[row]) * weight_scale (checked on the fixture)
    Producer("quark-int4-fp8", "AMD Quark int4_fp8 (int4 per channel under an FP8 per-tensor scale)", "w4a16",
             ".weight", ("I32",), ".weight_scale_2", ("F32", "BF16", "F16"), "int4", "float", "int4x8-reorder",
             None, global_scale=".weight_scale", global_direction="multiplier", zero_point=".weight_zero_point_2",
             extra=(".input_scale",), config=_quark_all({"dtype": "int4", "qscheme": "per_channel"},
                                                        {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}),
             value="w = (q - zero_point_2) * weight_scale_2[row] * weight_scale; [out, in/8] int32, nibbles "
                   "0,2,4,6,1,3,5,7, not transposed", writers=QUARK, marker_required=True,
             overrides=("quark-int4", "quark-int4-per-channel", "quark-fp8")),
    Producer("quark-mxfp6-e2m3", "AMD Quark MXFP6 E2M3 (OCP FP6 elements, E8M0 scales per 32)", "mxfp6",
             ".weight", ("U8",), ".weight_scale", ("U8",), "e2m3", "e8m0", "fp6", (1, 32),
             extra=(".input_scale", ".output_scale"), config=_quark("fp6_e2m3"),
             value="w = fp6 * 2^(scale - 127); [out, in * 3/4] bytes: four codes per little-endian 24 bits",
             writers=QUARK, marker_required=True, overrides=("quark-mxfp4", "modelopt-mxfp4")),
    Producer("quark-mxfp6-e3m2", "AMD Quark MXFP6 E3M2 (OCP FP6 elements, E8M0 scales per 32)", "mxfp6",
             ".weight", ("U8",), ".weight_scale", ("U8",), "e3m2", "e8m0", "fp6", (1, 32),
             extra=(".input_scale", ".output_scale"), config=_quark("fp6_e3m2"),
             value="w = fp6 * 2^(scale - 127); [out, in * 3/4] bytes: four codes per little-endian 24 bits",
             writers=QUARK, marker_required=True, overrides=("quark-mxfp4", "modelopt-mxfp4")),
    Producer("compressed-tensors-int8", "compressed-tensors W8A8 int8 (int-quantized)", "int8",
             ".weight", ("I8",), ".weight_scale", ("F32", "BF16", "F16"), "int8", "float", "byte", None,
             extra=(".input_scale", ".input_zero_point"), config=_ct_format("int-quantized"),
             value="w = q * s (per channel [out, 1] or per tensor)", writers=CT),
    Producer("modelopt-w4a16-awq", "NVIDIA ModelOpt W4A16_AWQ (int4 per group, AWQ pre_quant_scale)", "w4a16",
             ".weight", ("U8",), ".weight_scale", ("F32", "BF16", "F16"), "int4", "float", "int4-rows", None,
             pre_scale=".pre_quant_scale", extra=(".input_scale",), config=_modelopt("W4A16_AWQ"),
             value="w = q * s_group * pre_quant_scale[column] (the input's AWQ multiplier folded in, rounded once)",
             writers=MODELOPT),
    Producer("modelopt-int8", "NVIDIA ModelOpt int8 (W8A8_SQ_PER_CHANNEL, W8A16; SmoothQuant pre_quant_scale)",
             "int8", ".weight", ("I8",), ".weight_scale", ("F32", "BF16", "F16"), "int8", "float", "byte", None,
             pre_scale=".pre_quant_scale", extra=(".input_scale",), config=_modelopt("W8A8_SQ_PER_CHANNEL", "W8A16"),
             value="w = q * s_row * pre_quant_scale[column] (SmoothQuant's input multiplier folded in, rounded once)",
             writers=MODELOPT),
    # ModelOpt 0.47 writes W4A16_NVFP4 with the group size its config asks for (16 or 32) and records it
    # as hf_quant_config.json quantization.group_size: the block comes from the scale's shape, checked
    # against the sizes the config names, never from a fixed number
    Producer("modelopt-w4a16-nvfp4", "NVIDIA ModelOpt W4A16_NVFP4 (NVFP4 elements and scales, group 16 or 32)",
             "nvfp4", ".weight", ("U8",), ".weight_scale", ("F8_E4M3",), "e2m1", "ue4m3", "fp4", None,
             global_scale=".weight_scale_2", global_direction="multiplier", config=_modelopt("W4A16_NVFP4"),
             value="w = e2m1 * s_block * weight_scale_2, one UE4M3 scale per group_size (16 or 32) values",
             writers=MODELOPT, marker_required=True),
    Producer("quark-int4", "AMD Quark int4 weight-only per group (pack_method reorder)", "w4a16",
             ".weight", ("I32",), ".weight_scale", ("F32", "BF16", "F16"), "int4", "float", "int4x8-reorder-t",
             None, zero_point=".weight_zero_point", config=_quark("int4"),
             value="w = (q - zero_point) * s_group; stored transposed, nibbles 0,2,4,6,1,3,5,7", writers=QUARK),
    Producer("quark-uint4", "AMD Quark uint4 weight-only per group (pack_method reorder, asymmetric)", "w4a16",
             ".weight", ("I32",), ".weight_scale", ("F32", "BF16", "F16"), "uint4", "float", "int4x8-reorder-t",
             None, zero_point=".weight_zero_point", config=_quark("uint4"),
             value="w = (q - zero_point) * s_group, q and zero point 0..15; stored transposed, nibbles 0,2,4,6,1,3,5,7",
             writers=QUARK),
    Producer("quark-int4-per-channel", "AMD Quark int4 weight-only per channel (pack_method reorder)", "w4a16",
             ".weight", ("I32",), ".weight_scale", ("F32", "BF16", "F16"), "int4", "float", "int4x8-reorder",
             None, zero_point=".weight_zero_point", config=_quark("int4", qscheme="per_channel"),
             value="w = (q - zero_point) * s[row]; [out, in/8] int32, nibbles 0,2,4,6,1,3,5,7 (not transposed)",
             writers=QUARK, marker_required=True, overrides=("quark-int4",)),
    Producer("quark-uint4-per-channel", "AMD Quark uint4 weight-only per channel (pack_method reorder)", "w4a16",
             ".weight", ("I32",), ".weight_scale", ("F32", "BF16", "F16"), "uint4", "float", "int4x8-reorder",
             None, zero_point=".weight_zero_point", config=_quark("uint4", qscheme="per_channel"),
             value="w = (q - zero_point) * s[row], q and zero point 0..15; [out, in/8] int32, not transposed",
             writers=QUARK, marker_required=True, overrides=("quark-uint4",)),
    Producer("quark-int8", "AMD Quark int8", "int8",
             ".weight", ("I8",), ".weight_scale", ("F32", "BF16", "F16"), "int8", "float", "byte", None,
             zero_point=".weight_zero_point", extra=(".input_scale", ".input_zero_point", ".output_scale"),
             config=_quark("int8"), value="w = (q - zero_point) * s", writers=QUARK),
    Producer("compressed-tensors-w4a16", "compressed-tensors W4A16 (pack-quantized, 4 bits)", "w4a16",
             ".weight_packed", ("I32",), ".weight_scale", ("BF16", "F16", "F32"), "int4", "float", "int4x8", None,
             zero_point=".weight_zero_point", shape_tensor=".weight_shape",
             config=_ct_pack(4),
             value="w = (q - zero_point) * s_group; eight int4 (+8) per int32, element i at bits 4i", writers=CT),
    Producer("compressed-tensors-w8a16", "compressed-tensors W8A16 (pack-quantized, 8 bits)", "w8a16",
             ".weight_packed", ("I32",), ".weight_scale", ("BF16", "F16", "F32"), "int8", "float", "int8x4", None,
             zero_point=".weight_zero_point", shape_tensor=".weight_shape",
             config=_ct_pack(8),
             value="w = (q - zero_point) * s_group; four int8 (+128) per int32, element i at bits 8i", writers=CT,
             marker_required=True),
)


BNB = ("bitsandbytes 0.50.2 through transformers 5.24 save_pretrained",)


def _bnb(flag: str) -> tuple[Any, ...]:
    """transformers' BitsAndBytesConfig: quant_method bitsandbytes, and load_in_4bit or load_in_8bit."""
    return ((("config.json", "quantization_config.quant_method", "bitsandbytes"),
             ("config.json", f"quantization_config.{flag}", "true")),)


PRODUCERS += (
    # bitsandbytes 4-bit: ``L.weight`` U8 [n/2, 1], the flattened weight two codes per byte (element 2i in
    # the high nibble), one absmax per 64 values: F32 ``weight.absmax``, or with double quantization U8
    # codes into ``weight.nested_quant_map`` under ``weight.nested_absmax`` plus an offset kept only in the
    # ``weight.quant_state.bitsandbytes__nf4`` / ``__fp4`` JSON (bytes); the 16 values are ``weight.quant_map``
    Producer("bitsandbytes-4bit", "bitsandbytes NF4 / FP4 (4-bit, absmax per 64 values)", "bnb4",
             ".weight", ("U8",), ".weight.absmax", ("F32", "U8"), "nf4/fp4", "float", "bnb4", (1, 64),
             extra=(".weight.quant_map", ".weight.nested_absmax", ".weight.nested_quant_map",
                    ".weight.quant_state.bitsandbytes__nf4", ".weight.quant_state.bitsandbytes__fp4"),
             config=_bnb("load_in_4bit"), writers=BNB,
             value="w = float32(quant_map[code] * absmax[block of 64]) (double quantization: absmax = "
                   "float32(nested_quant_map[c] * nested_absmax) + offset)"),
    # bitsandbytes LLM.int8: ``L.weight`` I8 [out, in] and ``L.SCB`` F32 [out] (the row's absmax)
    Producer("bitsandbytes-int8", "bitsandbytes LLM.int8 (row-wise SCB)", "bnb8",
             ".weight", ("I8",), ".SCB", ("F32",), "int8", "float", "bnb8", None,
             extra=(".weight_format",), config=_bnb("load_in_8bit"), writers=BNB,
             value="w = float32(float32(q * SCB[row]) * float32(1/127))"),
)

GPTQ_WRITERS = ("gptqmodel 7.7 (checkpoint_format gptq and gptq_v2)",)
AWQ_WRITERS = ("autoawq 0.2.9 (version gemm)",)

PRODUCERS += (
    # GPTQ (fmtsim.checkpoint.gptq): ``L.qweight`` I32 [in*bits/32, out], codes down each column's bit
    # string; ``L.qzeros`` I32 [groups, out*bits/32]; ``L.scales`` F16 [groups, out]; ``L.g_idx`` I32 [in]
    Producer("gptq", "GPTQ (gptqmodel / AutoGPTQ; 2, 3, 4, 8 bits, v1 or v2 zero points, act-order g_idx)", "gptq",
             ".qweight", ("I32",), ".scales", ("F16", "BF16", "F32"), "uint", "float", "gptq", None,
             zero_point=".qzeros", extra=(".g_idx",), config=(("config.json", "quantization_config.quant_method",
                                                                "gptq"),),
             writers=GPTQ_WRITERS, marker_required=True,
             value="w[j, i] = scales[g_idx[i], j] * (q[i, j] - z[g_idx[i], j]) (v1: z = stored + 1)"),
    # AWQ GEMM (autoawq ``WQLinear_GEMM``): ``L.qweight`` I32 [in, out/8], eight outputs per int32 in the nibble
    # order 0,2,4,6,1,3,5,7 (Quark's reorder packing), ``L.qzeros`` the same [in/group, out/8], ``L.scales``
    # F16 [in/group, out]
    # AWQ GEMV (autoawq ``WQLinear_GEMV``): ``L.qweight`` I32 [out, in/8] in plain nibble order, ``L.qzeros``
    # I32 [out, ZW], ``L.scales`` F16 [out, 8*ZW] padded past in/group (fmtsim.checkpoint.hub_layouts)
    Producer("awq-gemv", "AWQ GEMV (autoawq; 4-bit, zero point per group, rows as nn.Linear)", "awq-gemv",
             ".qweight", ("I32",), ".scales", ("F16", "BF16", "F32"), "uint4", "float", "awq-gemv", None,
             zero_point=".qzeros", config=((("config.json", "quantization_config.quant_method", "awq"),
                                            ("config.json", "quantization_config.version", "gemv")),),
             writers=AWQ_WRITERS, marker_required=True, synthetic=False, value="w = (q - z) * s"),
    # AWQ GEMV_fast: ``L.qweight`` I16 [out/4, in] (rows interleaved, inputs reordered), ``L.scales`` and
    # ``L.qzeros`` F16 [8*ZW, out], qzeros the float16 -(scale * zero)
    Producer("awq-gemv-fast", "AWQ GEMV_fast (autoawq; 4-bit, scaled zero per group)", "awq-gemv-fast",
             ".qweight", ("I16",), ".scales", ("F16",), "uint4", "float", "awq-gemv-fast", None,
             zero_point=".qzeros", config=((("config.json", "quantization_config.quant_method", "awq"),
                                            ("config.json", "quantization_config.version", "gemv_fast")),),
             writers=AWQ_WRITERS, marker_required=True, synthetic=False,
             value="w = q * s + qzeros (qzeros = -(s * z) in float16; the CUDA kernel's one fused step)"),
    # AWQ Marlin: ``L.qweight`` I32 [in/16, 2*out] in Marlin's tile order, ``L.scales`` F16 [groups, out]
    # permuted; symmetric, no zeros
    Producer("awq-marlin", "AWQ Marlin (autoawq; 4-bit symmetric, Marlin's tile order)", "awq-marlin",
             ".qweight", ("I32",), ".scales", ("F16",), "int4", "float", "awq-marlin", None,
             config=((("config.json", "quantization_config.quant_method", "awq"),
                      ("config.json", "quantization_config.version", "marlin")),),
             writers=AWQ_WRITERS, marker_required=True, synthetic=False, value="w = (nibble - 8) * s"),
    Producer("awq-gemm", "AWQ GEMM (autoawq; 4-bit, zero point per group)", "w4a16",
             ".qweight", ("I32",), ".scales", ("F16", "BF16", "F32"), "uint4", "float", "int4x8-reorder-t", None,
             zero_point=".qzeros", config=((("config.json", "quantization_config.quant_method", "awq"),
                                            ("config.json", "quantization_config.version", "gemm")),),
             writers=AWQ_WRITERS, marker_required=True, value="w = (q - z) * s"),
)

QUANTO = ("optimum-quanto 0.2.7 (QuantizedModelForCausalLM.save_pretrained)",)
HQQ = ("hqq 0.2.8 (AutoHQQHFModel.save_to_safetensors)",)
TORCHAO = ("torchao 0.18.0 through transformers 5.25 TorchAoConfig, safe_serialization",)
HQQ_META = (".shape", ".nbits", ".group_size", ".axis", ".packing", ".channel_wise", ".compute_dtype",
            ".encoded_state_dict", ".offload_meta", ".optimize", ".quant_scale", ".quant_zero", ".round_zero",
            ".stores_quant_config", ".unpack_view_dtype", ".view_as_float", ".bias")


def _quanto(*qtypes: str) -> tuple[Any, ...]:
    return tuple(("quanto_qmap.json", "*.weights", q) for q in qtypes)


PRODUCERS += (
    # optimum-quanto (fmtsim.checkpoint.hub_layouts): the QTensor flattened into ``L.weight._data`` /
    # ``._scale`` (/ ``._shift``; ``._data._data`` for the packed qint4 / qint2); the qtype per layer in
    # quanto_qmap.json
    Producer("quanto-qbytes", "optimum-quanto qint8 / qfloat8 (scale per row)", "quanto",
             ".weight._data", ("I8", "F8_E4M3"), ".weight._scale", ("BF16", "F16", "F32"), "int8", "float",
             "quanto", None, extra=(".input_scale", ".output_scale"), config=_quanto("qint8", "qfloat8_e4m3fn"),
             dtype_elements=(("F8_E4M3", "e4m3"),), writers=QUANTO, marker_required=True, synthetic=False,
             value="w = q * scale[row]"),
    Producer("quanto-qbits", "optimum-quanto qint4 / qint2 (scale and shift per group)", "quanto",
             ".weight._data._data", ("U8",), ".weight._scale", ("BF16", "F16", "F32"), "uint4", "float",
             "quanto", None, zero_point=".weight._shift", extra=(".input_scale", ".output_scale"),
             config=_quanto("qint4", "qint2"), writers=QUANTO, marker_required=True, synthetic=False,
             value="w = q * scale[group] - shift[group] (quanto rounds the product to bfloat16 first)"),
    # HQQ: ``L.W_q`` with ``L.scale``, ``L.zero`` and its metadata tensors; no config marker (HQQ writes none)
    Producer("hqq", "HQQ (1-8 bits, scale and fractional zero per group)", "hqq",
             ".W_q", ("U8", "I32"), ".scale", ("BF16", "F16", "F32"), "uint", "float", "hqq", None,
             zero_point=".zero", extra=HQQ_META, writers=HQQ, synthetic=False,
             value="w = (q - zero[group]) * scale[group] (HQQ rounds the difference to bfloat16 first)"),
    # torchao: ``L._weight_qdata`` / ``_scale`` / ``_zero_point`` / ``_per_tensor_scale``, the tensor subclass
    # named in the safetensors metadata (Int8Tensor, Float8Tensor, IntxUnpackedToInt8Tensor, MXTensor, NVFP4Tensor)
    Producer("torchao", "torchao tensor subclasses (Int8, Float8, Intx, MX, NVFP4 weights)", "torchao",
             "._weight_qdata", ("I8", "F8_E4M3", "U8"), "._weight_scale", ("F32", "BF16", "F8_E8M0", "F8_E4M3"),
             "int8", "float", "torchao", None, zero_point="._weight_zero_point",
             extra=("._weight_per_tensor_scale",),
             config=(("config.json", "quantization_config.quant_method", "torchao"),), writers=TORCHAO,
             marker_required=True, synthetic=False,
             value="w = (q - zp) * s; MX: q * 2^(e-127); NVFP4: e2m1 * e4m3 * per_tensor_scale"),
)

# dtypes whose tensors hold packed or coded weights (not values a reader can take as they are)
PACKED_DTYPES = ("U8", "I8", "I16", "U16", "I32", "U32", "I64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4")


def unread_layout(dtypes: dict[str, str], configs: dict[str, Any], det: Detection) -> str | None:
    """Why a folder must be refused though no record failed: its config declares a quantization method
    no record reads (AWQ gemv / marlin, ...), or one a record is marked for while none of its tensors match
    it, and it holds packed tensors that no record matched. None when nothing is amiss."""
    if det.layers or det.ambiguous:
        return None
    packed = sorted(n for n, d in dtypes.items() if d in PACKED_DTYPES)
    marked = [get_producer(n) for n in det.config_producers]
    if marked and any(n.endswith(p.codes) for p in marked for n in packed):
        return None  # a marked record's codes without its scales: inspect names them (missing-scale)
    methods = [str(m) for m in _lookup(configs.get("config.json"), "quantization_config.quant_method")]
    if not methods and packed:  # codes only a config marker tells apart (GPTQ / AWQ qweight), and no config
        unmarked = sorted({p.title for p in PRODUCERS if p.marker_required and p.codes != ".weight" and
                           any(n.endswith(p.codes) and dtypes[n] in p.codes_dtypes for n in packed)})
        if unmarked:
            first = next(n for n in packed if any(n.endswith(p.codes) for p in PRODUCERS if p.title in unmarked))
            return (f"{first} (and {len(packed) - 1} more packed tensor(s)) look like the codes of "
                    f"{' or '.join(unmarked)}, whose layouts only config.json's quantization_config tells apart "
                    "(quant_method, bits, version); it is missing: refused rather than reported as unquantized")
    if not methods or not packed:
        return None
    kinds: dict[str, int] = {}
    for n in packed:
        kinds[dtypes[n]] = kinds.get(dtypes[n], 0) + 1
    fmt = _lookup(configs.get("config.json"), "quantization_config.checkpoint_format") + \
        _lookup(configs.get("config.json"), "quantization_config.version")
    what = f"quant_method {', '.join(map(repr, methods))}" + (f" ({', '.join(map(str, fmt))})" if fmt else "")
    return (f"config.json declares {what}, a layout fmtsim does not read; the folder holds "
            f"{len(packed)} packed tensor(s) ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))}, "
            f"e.g. {packed[0]}) that no producer record matches; refused rather than reported as unquantized")


def codes_without_scales(dtypes: dict[str, str], configs: dict[str, Any], det: Detection
                         ) -> list[tuple[str, Producer, list[str]]]:
    """Tensors that look like a record's codes (its suffix and dtype) that detection left unmatched for want
    of the record's scale tensors: (name, record, the missing tensors). The records are those a config
    marks, and those with a codes suffix of their own (not a bare ``.weight``, HQQ's ``.W_q``); dequantize
    refuses such a checkpoint rather than copy the packed codes as if they were weights."""
    marked = {n for n in det.config_producers}
    out = []
    for name in sorted(dtypes):
        if name in det.layers:
            continue
        for p in PRODUCERS:
            if p.refuse or not (p.name in marked or (not p.config and p.codes != ".weight")):
                continue
            if name.endswith(p.codes) and dtypes[name] in p.codes_dtypes:
                layer = name[: -len(p.codes)]
                missing = [layer + x for x in (p.scale, p.global_scale) if x and layer + x not in dtypes]
                if missing:
                    out.append((name, p, missing))
                    break
    return out


def get_producer(name: str) -> Producer:
    for p in PRODUCERS:
        if p.name == name:
            return p
    raise ValueError(f"unknown producer {name!r}; choose from {', '.join(p.name for p in PRODUCERS)}")


def _lookup(obj: Any, dotted: str) -> list[Any]:
    """Every value at ``dotted`` ('*' stands for any entry of a dict; a list is searched item by item,
    as Quark lists the weight specs of a two-level scheme)."""
    found = [obj]
    for key in dotted.split("."):
        nxt: list[Any] = []
        for o in [i for f in found for i in (f if isinstance(f, list) else [f])]:
            if isinstance(o, dict):
                if key == "*":
                    nxt += list(o.values())
                elif key in o:
                    nxt.append(o[key])
        found = nxt
    return found


def read_configs(directory: Path | None) -> dict[str, Any]:
    """The JSON config files a producer may mark (config.json, hf_quant_config.json, params.json,
    optimum-quanto's quanto_qmap.json and AutoGPTQ's quantize_config.json)."""
    out: dict[str, Any] = {}
    if directory is None:
        return out
    for name in ("config.json", "hf_quant_config.json", "params.json", "quanto_qmap.json", "quantize_config.json"):
        p = directory / name
        if p.is_file():
            try:
                out[name] = json.loads(p.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                out[name] = None
    return out


def _same(got: Any, value: Any) -> bool:
    if isinstance(got, list):
        return any(_same(g, value) for g in got)
    if isinstance(value, dict):  # every field of one object (one of Quark's weight specs)
        return isinstance(got, dict) and all(_same(got.get(k), v) for k, v in value.items())
    return isinstance(got, (str, int)) and str(got).lower() == str(value).lower()  # bool: "true" / "false"


def _condition(cond: tuple[str, str, Any], configs: dict[str, Any]) -> bool:
    file, key, value = cond
    return any(_same(got, value) for got in _lookup(configs.get(file), key))


def config_matches(p: Producer, configs: dict[str, Any]) -> bool:
    """Whether a config file marks ``p`` (the scheme it declares, not only the producer)."""
    for alt in p.config:
        conds = (alt,) if isinstance(alt[0], str) else alt
        if all(_condition(c, configs) for c in conds):
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
    pre_scale: str | None = None  # a per-input-column multiplier (AWQ pre_quant_scale) folded into the weight
    element: str = ""  # the element format of these codes (the record's, as the codes' dtype tag selects)


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


def _rule(p: Producer, layer: str, dtypes: dict[str, str]) -> tuple[Any, ...]:
    """What dequantization does; records with equal rules may be confused harmlessly (a zero point
    or input multiplier the layer does not have changes nothing)."""
    side = tuple(s if s and layer + s in dtypes else None for s in (p.zero_point, p.pre_scale))
    return (p.scheme, p.codes, p.scale, p.element_of(dtypes[layer + p.codes]), p.scale_format, p.packing,
            p.block, p.global_scale, p.global_direction, side)


def detect(dtypes: dict[str, str], configs: dict[str, Any], producer: str | None = None) -> Detection:
    """Match every tensor against the records. A config marker picks among records that fit;
    records that fit with different rules and no marker to choose are reported as ambiguous,
    never guessed. ``producer`` forces one record."""
    forced = get_producer(producer) if producer else None
    marked = tuple(p.name for p in PRODUCERS if config_matches(p, configs))
    over = {o for p in PRODUCERS if p.name in marked for o in p.overrides}  # a more specific record marked too
    marked = tuple(n for n in marked if n not in over)
    layers: dict[str, LayerMatch] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    records = (forced,) if forced else PRODUCERS
    for name in sorted(dtypes):
        fits = []
        for p in records:
            if p.marker_required and not forced and p.name not in marked:
                continue
            if name.endswith(p.codes):
                layer = name[: -len(p.codes)]
                if _fits(p, layer, dtypes):
                    fits.append(p)
        if not fits:
            continue
        chosen = [p for p in fits if p.name in marked] or fits
        rules = {_rule(p, name[: -len(p.codes)], dtypes) for p in chosen}
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
            tuple(p.name for p in fits),
            layer + best.pre_scale if best.pre_scale and layer + best.pre_scale in dtypes else None,
            best.element_of(dtypes[name]))
    count: dict[str, int] = {}
    for m in layers.values():
        count[m.producer.name] = count.get(m.producer.name, 0) + 1
    return Detection(layers, ambiguous, count, marked)
