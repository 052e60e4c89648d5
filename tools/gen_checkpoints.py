"""Small synthetic checkpoints laid out as each producer's loader expects (names, dtypes, shapes,
config files), quantized with fmtsim's own recipes, for the checkpoint tests and the README.

    python -m tools.gen_checkpoints OUT_DIR [--producer NAME ...]

writes OUT_DIR/<producer>/ for each record of fmtsim.checkpoint.producers (all by default) and
OUT_DIR/<producer>.original.safetensors with the float32 weights each was quantized from.
Everything is seeded: the same command writes the same bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

import fmtsim
from fmtsim import mx, nvfp4
from fmtsim.layout import pack_fp4, to_gpt_oss

E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32


def _weights(rng: np.random.Generator, shape: tuple[int, ...], outliers: bool = True) -> np.ndarray:
    w = rng.standard_normal(shape).astype(F32) * F32(0.02)
    if outliers:
        w.reshape(-1)[:: 97] *= F32(8.0)
    return w


def _fp8_codes(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return np.asarray(fmtsim.encode((w / scale).astype(F32), "e4m3")).astype(np.uint8)


def _block_scale(w: np.ndarray, b: int) -> np.ndarray:
    rows, cols = w.shape
    s = np.empty((-(-rows // b), -(-cols // b)), F32)
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            s[i, j] = F32(np.max(np.abs(w[i * b:(i + 1) * b, j * b:(j + 1) * b]))) / F32(448.0)
    return s


def _save(directory: Path, shards: dict[str, dict[str, np.ndarray]], configs: dict[str, object],
          originals: dict[str, np.ndarray]) -> None:
    from safetensors.numpy import save_file

    directory.mkdir(parents=True, exist_ok=True)
    weight_map: dict[str, str] = {}
    for name, tensors in shards.items():
        save_file(tensors, str(directory / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in tensors})
    if len(shards) > 1:
        (directory / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": 0}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))
    for fname, obj in configs.items():
        (directory / fname).write_text(json.dumps(obj, indent=2))
    save_file(originals, str(directory.parent / f"{directory.name}.original.safetensors"))


def _layers() -> list[str]:
    return ["model.layers.0.self_attn.q_proj", "model.layers.0.mlp.down_proj"]


MODELOPT_CFG = {"producer": {"name": "modelopt"}}
SAME_LAYOUT: dict[str, tuple[str, tuple[tuple[str, str], ...], dict[str, Any]]] = {
    "modelopt-mxfp4": ("quark-mxfp4", (), {"hf_quant_config.json": dict(MODELOPT_CFG, quantization={
        "quant_algo": "MXFP4", "group_size": 32})}),
    "compressed-tensors-mxfp4": ("quark-mxfp4", ((".weight", ".weight_packed"),), {"config.json": {
        "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}}}),
    "compressed-tensors-mxfp8": ("modelopt-mxfp8", (), {"config.json": {
        "quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp8-quantized"}}}),
    "quark-nvfp4": ("modelopt-nvfp4", (), {"config.json": {"quantization_config": {  # two specs, as Quark 0.13 writes
        "quant_method": "quark", "global_quant_config": {"weight": [
            {"dtype": "fp4", "group_size": 16}, {"dtype": "fp8_e4m3", "is_scale_quant": True}]}}}}),
}


def make(producer: str, out_dir: str | Path, seed: int = 11, group_size: int = 32) -> Path:
    """Write OUT_DIR/<producer>/ (and its .original.safetensors); returns the checkpoint path.
    ``group_size``: values per scale where the producer lets its user choose (ModelOpt W4A16_NVFP4)."""
    rng = np.random.default_rng(seed)
    d = Path(out_dir) / producer
    shapes = {_layers()[0]: (256, 160), _layers()[1]: (300, 260)}
    t: dict[str, np.ndarray] = {"model.layers.0.input_layernorm.weight": np.ones(160, ml_dtypes.bfloat16)}
    orig: dict[str, np.ndarray] = {}
    cfg: dict[str, object] = {"model_type": "llama", "torch_dtype": "bfloat16"}
    extra_cfg: dict[str, object] = {}
    if producer in ("deepseek-fp8-block", "modelopt-fp8", "compressed-tensors-fp8", "fbgemm-fp8", "quark-fp8",
                    "trtllm-fp8", "mistral-fp8"):
        for L, shp in shapes.items():
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            if producer == "deepseek-fp8-block":
                s = _block_scale(w, 128)
                codes = _fp8_codes(w, np.kron(s, np.ones((128, 128), F32))[: shp[0], : shp[1]])
                t[L + ".weight"], t[L + ".weight_scale_inv"] = codes.view(E4M3), s
            elif producer in ("compressed-tensors-fp8", "fbgemm-fp8"):
                s = (np.max(np.abs(w), axis=1, keepdims=True) / F32(448.0)).astype(F32)
                if producer == "compressed-tensors-fp8":
                    s = s.astype(ml_dtypes.bfloat16)
                codes = _fp8_codes(w, s.astype(F32))
                t[L + ".weight"], t[L + ".weight_scale"] = codes.view(E4M3), s
                if producer == "fbgemm-fp8":
                    t[L + ".input_scale_ub"] = np.array([1200.0], F32)
                else:
                    t[L + ".input_scale"] = np.array([0.03], F32)
            else:
                s0 = np.array(np.max(np.abs(w)) / F32(448.0), F32)
                codes = _fp8_codes(w, s0)
                suffix = {"trtllm-fp8": ".weights_scaling_factor", "mistral-fp8": ".qscale_weight"}.get(
                    producer, ".weight_scale")
                t[L + ".weight"], t[L + suffix] = codes.view(E4M3), s0 if producer != "quark-fp8" else s0.reshape(1)
                act = {"trtllm-fp8": ".activation_scaling_factor", "mistral-fp8": ".qscale_act"}.get(
                    producer, ".input_scale")
                t[L + act] = np.array(0.05, F32)
        if producer == "deepseek-fp8-block":
            cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                          "weight_block_size": [128, 128]}
        elif producer == "modelopt-fp8":
            extra_cfg["hf_quant_config.json"] = {"producer": {"name": "modelopt"},
                                                 "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
            t["model.layers.0.self_attn.k_scale"] = np.array(0.04, F32)
            t["model.layers.0.self_attn.v_scale"] = np.array(0.06, F32)
        elif producer == "compressed-tensors-fp8":
            cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "float-quantized",
                                          "config_groups": {"group_0": {"targets": ["Linear"],
                                                                        "weights": {"num_bits": 8, "type": "float",
                                                                                    "strategy": "channel"}}}}
        elif producer == "fbgemm-fp8":
            cfg["quantization_config"] = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}
        elif producer == "quark-fp8":
            cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {
                "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_scale_quant": False}}}
        elif producer == "trtllm-fp8":
            cfg = {"architecture": "LlamaForCausalLM", "quantization": {"quant_algo": "FP8"}}
        elif producer == "mistral-fp8":
            cfg = {}
            extra_cfg["params.json"] = {"dim": 160, "quantization": {"qformat_weight": "fp8_e4m3"}}
    elif producer in ("modelopt-nvfp4", "compressed-tensors-nvfp4"):
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 32)
            w = _weights(rng, shp)
            w[:4] *= F32(2e-4)  # quiet rows: their small blocks are where the NVFP4 recipes part
            orig[L + ".weight"] = w
            q = nvfp4.quantize(w, recipe="te" if producer == "modelopt-nvfp4" else "torchao")
            packed = pack_fp4(q.codes)
            scales = q.scales.astype(np.uint8).view(E4M3)
            if producer == "modelopt-nvfp4":
                t[L + ".weight"], t[L + ".weight_scale"] = packed, scales
                t[L + ".weight_scale_2"] = np.array(q.global_scale, F32)
                t[L + ".input_scale"] = np.array(0.01, F32)
            else:
                t[L + ".weight_packed"], t[L + ".weight_scale"] = packed, scales
                t[L + ".weight_global_scale"] = np.array([nvfp4.global_scale_to_stored(q.global_scale, "divisor")],
                                                         F32)
                t[L + ".input_global_scale"] = np.array([120.0], F32)
        if producer == "modelopt-nvfp4":
            extra_cfg["hf_quant_config.json"] = {"producer": {"name": "modelopt"},
                                                 "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
        else:
            cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}
    elif producer in ("gpt-oss-mxfp4", "gpt-oss-mxfp4-orig"):
        experts = 2
        sep = "_" if producer == "gpt-oss-mxfp4" else "."
        for L, shp in (("model.layers.0.mlp.experts.gate_up_proj", (experts, 128, 96)),
                       ("model.layers.0.mlp.experts.down_proj", (experts, 64, 64))):
            if producer == "gpt-oss-mxfp4-orig":
                L = L.replace("model.layers.0.mlp.experts.gate_up_proj", "block.0.mlp.mlp1_weight").replace(
                    "model.layers.0.mlp.experts.down_proj", "block.0.mlp.mlp2_weight")
            w = _weights(rng, shp)
            orig[L] = w
            q = mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule="floor")
            blocks, scales = to_gpt_oss(q)
            t[f"{L}{sep}blocks"], t[f"{L}{sep}scales"] = blocks, scales
            t[f"{L}_bias" if sep == "_" else f"{L[:-7]}_bias"] = np.zeros(shp[:2], ml_dtypes.bfloat16)
        cfg["quantization_config"] = {"quant_method": "mxfp4",
                                      "modules_to_not_convert": ["model.layers.*.self_attn", "model.embed_tokens"]}
    elif producer == "modelopt-mxfp8":
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 32)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            q = mx.quantize(w, "mxfp8_e4m3", axis=-1, block_size=32, scale_rule="floor")
            t[L + ".weight"], t[L + ".weight_scale"] = q.codes.astype(np.uint8).view(E4M3), q.scales.astype(np.uint8)
        extra_cfg["hf_quant_config.json"] = {"quantization": {"quant_algo": "MXFP8"}}
    elif producer == "quark-mxfp4":
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 32)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            q = mx.quantize(w, "mxfp4", axis=-1, block_size=32, scale_rule="even")
            t[L + ".weight"], t[L + ".weight_scale"] = pack_fp4(q.codes), q.scales.astype(np.uint8)
        cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {"weight": {
            "dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}}}
    elif producer in ("compressed-tensors-w4a16", "compressed-tensors-w8a16"):
        from fmtsim.checkpoint.intcodes import pack_dense

        bits = 4 if producer.endswith("w4a16") else 8
        qmax = (1 << (bits - 1)) - 1
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 32) if bits == 4 else (shp[0], shp[1] - 1)  # 8 bits: ends mid-word
            group = 32
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            groups = -(-shp[1] // group)
            wp = np.pad(w, ((0, 0), (0, groups * group - shp[1])))
            s = (np.max(np.abs(wp.reshape(shp[0], -1, group)), axis=2) / F32(qmax)).astype(ml_dtypes.bfloat16)
            sf = np.repeat(s.astype(F32), group, axis=1)[:, : shp[1]]
            q = np.clip(np.rint(w / sf), -qmax - 1, qmax).astype(np.int64)
            t[L + ".weight_packed"], t[L + ".weight_scale"] = pack_dense(q, bits), s
            t[L + ".weight_shape"] = np.array(shp, np.int64)
        cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                          "num_bits": bits, "type": "int", "strategy": "group",
                                          "group_size": group, "symmetric": True}}}}
    elif producer == "quark-int4-fp8":  # int4 per output row of w / g, g a per-tensor FP8-level scale
        from fmtsim.checkpoint.intcodes import pack_codes

        for L, shp in shapes.items():
            shp = (shp[0] - shp[0] % 8, shp[1] - shp[1] % 8)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            g = (np.max(np.abs(w)) / F32(448.0)).astype(F32)
            s2 = (np.max(np.abs(w / g), axis=1) / F32(7.0)).astype(F32)
            q = np.clip(np.rint(w / g / s2[:, None]), -8, 7).astype(np.int64)
            t[L + ".weight"] = pack_codes("int4x8-reorder", q)
            t[L + ".weight_scale"], t[L + ".weight_scale_2"] = np.array(g, F32), s2
            t[L + ".weight_zero_point_2"] = pack_codes("int4x8-reorder", np.zeros((1, shp[0]), np.int64)).reshape(-1)
        cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {"weight": [
            {"dtype": "fp8_e4m3", "qscheme": "per_tensor"}, {"dtype": "int4", "qscheme": "per_channel", "ch_axis": 0}]}}
    elif producer in ("quark-mxfp6-e2m3", "quark-mxfp6-e3m2"):
        from fmtsim.checkpoint.intcodes import pack_fp6

        element = producer.rsplit("-", 1)[1]
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 32)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            q = mx.quantize(w, f"mxfp6_{element}", axis=-1, block_size=32, scale_rule="even")
            t[L + ".weight"], t[L + ".weight_scale"] = pack_fp6(q.codes), q.scales.astype(np.uint8)
        cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {"weight": {
            "dtype": f"fp6_{element}", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}}}
    elif producer == "quark-amdfp4":  # FP4 with UE5M3 block scales: the smallest UE5M3 >= amax / 6, RNE elements
        from fmtsim.checkpoint.dequant import ue5m3_values

        table = ue5m3_values()[:0xFF]
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % 16)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            amax = np.max(np.abs(w.reshape(shp[0], -1, 16)), axis=2).astype(np.float64) / 6.0
            sc = np.searchsorted(table, amax).astype(np.uint8)
            sv = np.repeat(table[sc], 16, axis=1)
            codes = np.asarray(fmtsim.encode((w / sv).astype(F32), "e2m1")).astype(np.uint8)
            t[L + ".weight"], t[L + ".weight_scale"] = pack_fp4(codes), sc
        cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {"weight": {
            "dtype": "fp4", "qscheme": "per_group", "group_size": 16, "scale_format": "e5m3"}}}
    elif producer in SAME_LAYOUT:  # another producer's layout under this producer's names and config
        base, renames, config = SAME_LAYOUT[producer]
        src = make(base, Path(out_dir) / ".same-layout", seed)
        from fmtsim.checkpoint import load

        for k, v in load(src).items():
            for old, new in renames:  # a suffix renamed: the codes tensor of the layout
                k = k[: -len(old)] + new if k.endswith(old) else k
            t[k] = v
        orig = dict(load(src.parent / f"{base}.original.safetensors"))
        cfg, extra_cfg = dict(cfg, **config.get("config.json", {})), {k: v for k, v in config.items()
                                                                        if k != "config.json"}
    elif producer == "modelopt-w4a16-nvfp4":  # NVFP4 elements and scales, group_size values per scale (16 or 32)
        for L, shp in shapes.items():
            shp = (shp[0], shp[1] - shp[1] % group_size)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            g = F32(np.max(np.abs(w)) / F32(6 * 448))
            blocks = w.reshape(shp[0], -1, group_size)
            sc = np.asarray(fmtsim.encode((np.max(np.abs(blocks), axis=2) / F32(6) / g).astype(F32), "e4m3"),
                            np.uint8)
            sv = np.asarray(fmtsim.decode(sc, "e4m3", np.float32), F32)
            with np.errstate(divide="ignore", invalid="ignore"):
                y = np.where(sv[:, :, None] > 0, blocks / (sv[:, :, None] * g), 0).astype(F32)
            codes = np.asarray(fmtsim.encode(y.reshape(shp), "e2m1"), np.uint8)
            t[L + ".weight"], t[L + ".weight_scale"] = pack_fp4(codes), sc.view(E4M3)
            t[L + ".weight_scale_2"] = np.array(g, F32)
        extra_cfg["hf_quant_config.json"] = dict(MODELOPT_CFG, quantization={"quant_algo": "W4A16_NVFP4",
                                                                             "group_size": group_size})
    elif producer in ("compressed-tensors-int8", "quark-int8", "modelopt-w4a16-awq", "quark-int4", "quark-uint4",
                      "modelopt-int8", "quark-int4-per-channel", "quark-uint4-per-channel"):
        from fmtsim.checkpoint.intcodes import pack_codes
        from fmtsim.checkpoint.producers import get_producer

        rec = get_producer(producer)
        int4 = rec.element in ("int4", "uint4")
        off = 8 if rec.element == "uint4" else 0  # uint4: codes 0..15 around a zero point of 8
        per_channel = producer.endswith("-per-channel")
        group = 32
        for L, shp in shapes.items():
            shp = (shp[0] - shp[0] % 8, shp[1] - shp[1] % group)
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            if per_channel:  # one bfloat16 scale per output row
                s = (np.max(np.abs(w), axis=1) / F32(7.0)).astype(ml_dtypes.bfloat16)
                sf = s.astype(F32)[:, None]
            elif int4:
                s = (np.max(np.abs(w.reshape(shp[0], -1, group)), axis=2) / F32(7.0)).astype(F32)
                sf = np.repeat(s, group, axis=1)
            else:
                s = (np.max(np.abs(w), axis=1, keepdims=True) / F32(127.0)).astype(ml_dtypes.bfloat16)
                sf = s.astype(F32)
            q = np.clip(np.rint(w / sf), -8 if int4 else -127, 7 if int4 else 127).astype(np.int64) + off
            t[L + ".weight"] = pack_codes(rec.packing, q)
            t[L + ".weight_scale"] = s.T.copy() if rec.packing == "int4x8-reorder-t" else s
            if producer in ("quark-int4", "quark-uint4"):
                t[L + ".weight_zero_point"] = pack_codes(rec.packing, np.full((shp[0], s.shape[1]), off, np.int64))
            if per_channel:  # [out/8], packed along the outputs
                t[L + ".weight_zero_point"] = pack_codes(rec.packing, np.full((1, shp[0]), off, np.int64)).reshape(-1)
            if producer in ("modelopt-w4a16-awq", "modelopt-int8"):
                t[L + ".pre_quant_scale"] = (1 + rng.random(shp[1])).astype(ml_dtypes.bfloat16)
        if producer == "compressed-tensors-int8":
            cfg["quantization_config"] = {"quant_method": "compressed-tensors", "format": "int-quantized"}
        elif producer in ("modelopt-w4a16-awq", "modelopt-int8"):
            algo = "W4A16_AWQ" if int4 else "W8A8_SQ_PER_CHANNEL"
            extra_cfg["hf_quant_config.json"] = {"producer": {"name": "modelopt"},
                                                 "quantization": {"quant_algo": algo, "group_size": group}}
        else:
            cfg["quantization_config"] = {"quant_method": "quark", "global_quant_config": {"weight": {
                "dtype": rec.element, "qscheme": "per_group" if int4 and not per_channel else "per_channel",
                "group_size": None if per_channel else group}}}
    elif producer in ("gptq", "awq-gemm"):
        # GPTQ v1 4-bit with act-order (a permuted g_idx), or AWQ GEMM: codes 0..15 around a zero point per
        # group; fmtsim's layouts (gptq.py; intcodes' int4x8-reorder-t), quantized here by rounding
        from fmtsim.checkpoint.intcodes import pack_codes, pack_dense

        group = 32
        for L, shp in shapes.items():
            shp = (shp[0] - shp[0] % 8, shp[1] - shp[1] % group)
            out_f, in_f = shp
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            g_idx = (np.arange(in_f) // group) if producer == "awq-gemm" else rng.permutation(np.arange(in_f) // group)
            wf = w.astype(F32)
            lo = np.stack([wf[:, g_idx == k].min(axis=1) for k in range(in_f // group)], axis=0)  # [groups, out]
            hi = np.stack([wf[:, g_idx == k].max(axis=1) for k in range(in_f // group)], axis=0)
            scale = np.maximum((hi - lo) / F32(15), F32(1e-6)).astype(np.float16)
            zero = np.clip(np.rint(-lo / scale.astype(F32)), 0, 15).astype(np.int64)
            q = np.clip(np.rint(wf.T / scale.astype(F32)[g_idx]) + zero[g_idx], 0, 15).astype(np.int64)  # [in, out]
            if producer == "gptq":
                t[L + ".qweight"] = pack_dense(q - 8, 4, packed_dim=0)
                t[L + ".qzeros"] = pack_dense(zero - 1 - 8, 4, packed_dim=1)  # v1: zero - 1
                t[L + ".g_idx"] = g_idx.astype(np.int32)
            else:
                t[L + ".qweight"] = pack_codes("int4x8-reorder-t", q.T)
                t[L + ".qzeros"] = pack_codes("int4x8-reorder-t", zero.T)
            t[L + ".scales"] = scale
        if producer == "gptq":
            cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": group, "desc_act": True,
                                          "sym": False, "checkpoint_format": "gptq"}
        else:
            cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": group, "zero_point": True,
                                          "version": "gemm"}
    elif producer in ("bitsandbytes-4bit", "bitsandbytes-int8"):
        # bitsandbytes' layouts (fmtsim.checkpoint.bnb), quantized here by the nearest code of each value
        # over its block's absmax; the NF4 table is bitsandbytes' (functional.get_4bit_type, as stored)
        nf4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                        -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                        0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                        0.7229568362236023, 1.0], F32)
        for L, shp in shapes.items():
            w = _weights(rng, shp)
            orig[L + ".weight"] = w
            if producer == "bitsandbytes-int8":
                scb = np.max(np.abs(w.astype(F32)), axis=1)
                t[L + ".weight"] = np.clip(np.rint(w.astype(F32) * F32(127) / scb[:, None]), -127, 127).astype(np.int8)
                t[L + ".SCB"] = scb
                t[L + ".weight_format"] = np.array(0, np.uint8)
                continue
            flat = w.astype(F32).reshape(-1)
            n = flat.size
            padded = np.concatenate([flat, np.zeros(-n % 64, F32)]).reshape(-1, 64)
            absmax = np.max(np.abs(padded), axis=1)
            codes = np.argmin(np.abs(padded[..., None] / absmax[:, None, None] - nf4), axis=-1).reshape(-1)[:n]
            codes = np.concatenate([codes, np.zeros(n % 2, np.int64)])
            t[L + ".weight"] = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8).reshape(-1, 1)
            t[L + ".weight.absmax"] = absmax.astype(F32)
            t[L + ".weight.quant_map"] = nf4
            state = {"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": list(shp)}
            t[L + ".weight.quant_state.bitsandbytes__nf4"] = np.frombuffer(json.dumps(state).encode(), np.uint8)
        flag = "load_in_8bit" if producer == "bitsandbytes-int8" else "load_in_4bit"
        cfg["quantization_config"] = {"quant_method": "bitsandbytes", flag: True, "bnb_4bit_quant_type": "nf4"}
    else:
        raise SystemExit(f"gen_checkpoints: no generator for producer {producer!r}")
    names = sorted(t)
    half = len(names) // 2
    shards = {"model-00001-of-00002.safetensors": {k: t[k] for k in names[:half]},
              "model-00002-of-00002.safetensors": {k: t[k] for k in names[half:]}}
    configs = dict(extra_cfg)
    if cfg:
        configs["config.json"] = cfg
    _save(d, shards, configs, orig)
    return d


def rewrite(checkpoint: Path, name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
    """Plant a change: replace tensor ``name`` in whichever shard of ``checkpoint`` holds it by
    fn(a copy of it) (the tests' faults: a wrong scale byte, swapped nibbles, ...)."""
    from safetensors.numpy import save_file

    from fmtsim.checkpoint import load

    for shard in sorted(Path(checkpoint).glob("*.safetensors")):
        t = load(shard)
        if name in t:
            t[name] = fn(t[name].copy())
            save_file(t, str(shard))
            return
    raise KeyError(name)


def main(argv: list[str] | None = None) -> int:
    from fmtsim.checkpoint.producers import PRODUCERS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--producer", action="append", choices=[p.name for p in PRODUCERS])
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    # refused: nothing to read; not synthetic: only the library's own fixtures hold the layout
    for name in args.producer or [p.name for p in PRODUCERS if not p.refuse and p.synthetic]:
        print(make(name, args.out_dir, args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
