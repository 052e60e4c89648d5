"""Checkpoints as the producers' own libraries write them: the fixtures under
tests/fixtures/producers/.

    python tools/gen_producer_fixtures.py [--venvs /work/pvenvs] [--only llmcompressor,modelopt,quark]

One tiny Llama-like model with random bfloat16 weights (hidden 128, intermediate 320 -- a width
that is not a multiple of 128 -- four heads, two KV heads, one layer, and a few outlier rows
scaled 40x, a vocabulary of 32) is written once to ``original/``. Each producer then runs in its own virtual
environment (they pin different transformers versions): the script re-runs itself there as a
worker (``--worker NAME``), which loads ``original/``, quantizes it on the CPU in every scheme the
library offers, saves each checkpoint the producer's own way (llm-compressor
``save_pretrained(save_compressed=True)``, ModelOpt ``export_hf_checkpoint``, Quark
``export_safetensors``) into ``<producer>-<scheme>/``, keeps only the config files and the
safetensors, and writes ``VERSIONS`` (the producer's package versions) and a line per scheme in
``SCHEMES-<producer>.txt`` (written, or why not). Then each producer's own reader runs on its
fixtures (``--worker ct-own-dequant`` / ``modelopt-own-dequant`` / ``quark-own-dequant``) and the
SHA-256 of what it returns goes to ``OWN_DEQUANT.json``. ``FMTSIM_PRODUCER_OUT=DIR`` writes
elsewhere. Schemes whose weights are byte-identical to another's are removed by hand afterwards
(listed in the fixtures' README).

``--model edge`` writes a second set under ``edge/`` (its own ``original/``: hidden 64, intermediate 256,
and the edge weights of :func:`_edge_weights`), e.g. ``--only modelopt --schemes
NVFP4_DEFAULT_CFG,NVFP4_MLP_WEIGHT_ONLY_CFG,MXFP4_DEFAULT_CFG --model edge`` and ``--only quark
--schemes nvfp4,mxfp4,mxfp6_e2m3 --model edge``; ``--model large`` (hidden 512, intermediate 2048,
plain random weights) writes under ``large/`` and is for looking for gaps, not committed.

The producers are not dependencies of fmtsim: nothing here is imported by the package or the
tests. A venv per producer: ``python3 -m venv /work/pvenvs/NAME`` then ``pip install
torch==2.13.0`` and ``llmcompressor`` / ``nvidia-modelopt[torch]`` (ModelOpt 0.47 also imports
``requests``) / ``amd-quark`` (Quark's ``import_model_from_safetensors`` needs ``accelerate``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("FMTSIM_PRODUCER_OUT") or ROOT / "tests" / "fixtures" / "producers")
VOCAB = 32  # the tied bfloat16 embedding is in every fixture: a small vocabulary keeps them small
PRODUCERS = ("llmcompressor", "modelopt", "quark")
KEEP = ("OWN_DEQUANT.json", "config.json", "hf_quant_config.json", "quantization_config.json", "model.safetensors",
        "model.safetensors.index.json")
SEED = 20261201
OUTLIER_ROWS = {"mlp.down_proj": (5, 200), "mlp.gate_proj": (17,), "self_attn.q_proj": (3,)}


# ---- the original model (runs in any producer venv: needs torch and transformers) -------------------


# hidden, intermediate, heads, KV heads, head dim: "tiny" is the fixture set under producers/; "edge" (under
# producers/edge/) adds the edge weights of _edge_weights; "large" is for looking for gaps (not committed)
MODELS = {"tiny": (128, 320, 4, 2, 32), "edge": (64, 256, 2, 1, 32), "large": (512, 2048, 8, 2, 64)}
MODEL = "tiny"


def build_original(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, heads, kv, hd = MODELS[MODEL]
    cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=1, num_attention_heads=heads,
                      num_key_value_heads=kv, head_dim=hd, vocab_size=VOCAB, max_position_embeddings=64,
                      tie_word_embeddings=True, torch_dtype="bfloat16")
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("proj.weight"):
                p.normal_(0.0, 0.05)
                for key, rows in OUTLIER_ROWS.items():
                    if key in name:
                        for r in rows:
                            if r < p.shape[0]:
                                p[r] *= 40.0
                if MODEL == "edge":
                    _edge_weights(name, p)
    model.save_pretrained(out, safe_serialization=True)
    _prune(out)


def _edge_weights(name: str, p) -> None:  # noqa: ANN001 - a bfloat16 torch parameter, changed in place
    """Weights at the edges of the block recipes (per 16- or 32-value block along a row):
    - gate_proj and up_proj (and q/k/v) 2^12 apart in magnitude: producers that share one global scale over
      fused projections give the smaller one block scales in (or below) UE4M3's subnormal range;
    - all-zero blocks, and single exact zeros inside blocks (a sign convention for +0);
    - blocks whose amax is 2^-14 .. 2^-24 of the tensor's (the block scale underflows);
    - blocks whose amax / 6 / global scale lies on a UE4M3 rounding midpoint (a tensor amax of
      1.75 x 2^k makes the global scale inexact, so the order of the float32 divisions decides the side)."""
    import torch

    g = torch.Generator().manual_seed(SEED + 7)
    rows, cols = p.shape
    if "up_proj" in name or "v_proj" in name:
        p.mul_(2.0 ** -12)
    if "down_proj" in name or "o_proj" in name:
        p[0, :32] = 0.0  # two 16-blocks, one 32-block
        p[1, 32:64] *= 2.0 ** -14
        p[2, 32:64] *= 2.0 ** -20
        p[3, 32:64] *= 2.0 ** -24
        p[4, 3::16] = 0.0  # an exact +0 in every block of the row
    if "gate_proj" in name or "q_proj" in name or "k_proj" in name:
        p[5, :64] = 0.0
        p[6, 7::32] = 0.0
        p[6, 9::32] = -0.0
        p[7, 16:48] *= 2.0 ** -16
    if "gate_proj" in name or "down_proj" in name or "k_proj" in name:
        # the tensor amax 1.75 (above every other |w|), and block maxima m / 256 for UE4M3 midpoints m
        p.clamp_(-1.0, 1.0)
        p[8, 0] = 1.75
        mids = [1.0625, 1.1875, 1.3125, 1.4375, 1.5625, 1.6875, 1.8125, 1.9375]
        for j in range(min(cols // 16 - 1, 40)):
            m = mids[j % 8] * 2.0 ** (j // 8 - 2)
            blk = p[9 + j // 8, 16 * j:16 * j + 16]
            blk.mul_(0.5 * m / 256 / blk.abs().max().clamp(min=1e-30))
            blk[int(torch.randint(0, 16, (1,), generator=g))] = m / 256


def _prune(d: Path) -> None:
    for f in d.iterdir():
        if f.name not in KEEP:
            shutil.rmtree(f) if f.is_dir() else f.unlink()


def _calib(n: int = 4, length: int = 32) -> list:
    import torch

    g = torch.Generator().manual_seed(SEED + 1)
    return [torch.randint(0, VOCAB, (1, length), generator=g) for _ in range(n)]


def _tokenizer():  # noqa: ANN202 - a tiny word-level tokenizer over the VOCAB ids (data are token ids already)
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(VOCAB)}
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="t0")),
                                   unk_token="t0", pad_token="t0")


def _load(orig: Path):  # noqa: ANN202 - a transformers model
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(orig, torch_dtype=torch.bfloat16)


def _versions(names: tuple[str, ...]) -> str:
    from importlib.metadata import PackageNotFoundError, version

    lines = []
    for n in names:
        try:
            lines.append(f"{n}=={version(n)}")
        except PackageNotFoundError:
            pass
    return "\n".join(lines) + "\n"


# ---- workers ----------------------------------------------------------------------------------------


def _llmcompressor(orig: Path, schemes: list[str] | None) -> dict[str, str]:
    from compressed_tensors.quantization.quant_scheme import PRESET_SCHEMES
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    ids = [t[0].tolist() for t in _calib()]
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]})
    done = {}
    for scheme in schemes or [s for s in LLMCOMPRESSOR_SCHEMES if s in PRESET_SCHEMES]:
        out = OUT / f"llmcompressor-{scheme.lower()}"
        try:
            ignore = ["lm_head"]
            if scheme in GROUP_128:  # llm-compressor refuses groups that do not divide a row (down_proj: 320)
                ignore.append("re:.*down_proj$")
            model = _load(orig)
            recipe = QuantizationModifier(targets="Linear", scheme=scheme, ignore=ignore)
            oneshot(model=model, recipe=recipe, dataset=ds, processor=_tokenizer(), num_calibration_samples=len(ids),
                    max_seq_length=32, output_dir=None)
            if out.exists():
                shutil.rmtree(out)
            model.save_pretrained(out, save_compressed=True)
            _prune(out)
            done[scheme] = "written"
        except Exception as e:  # noqa: BLE001 - record why a scheme is not on CPU
            shutil.rmtree(out, ignore_errors=True)
            done[scheme] = f"not written: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            traceback.print_exc()
    return done


LLMCOMPRESSOR_SCHEMES = ("FP8", "FP8_DYNAMIC", "FP8_BLOCK", "NVFP4", "NVFP4A16", "MXFP4", "MXFP4A16", "MXFP8",
                         "MXFP8A16", "W4A16", "W4A16_ASYM", "W8A16", "W8A8", "INT8")
GROUP_128 = ("W4A16", "W4A16_ASYM", "W8A16")
MODELOPT_GROUP_128 = ("INT4_AWQ_CFG", "INT4_BLOCKWISE_WEIGHT_ONLY_CFG", "W4A8_AWQ_BETA_CFG")
MODELOPT_CONFIGS = ("FP8_DEFAULT_CFG", "FP8_PER_CHANNEL_PER_TOKEN_CFG", "FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG",
                    "NVFP4_DEFAULT_CFG", "NVFP4_AWQ_LITE_CFG", "MXFP4_DEFAULT_CFG", "MXFP8_DEFAULT_CFG",
                    "INT4_AWQ_CFG", "INT4_BLOCKWISE_WEIGHT_ONLY_CFG", "INT8_DEFAULT_CFG", "INT8_SMOOTHQUANT_CFG",
                    "W4A8_AWQ_BETA_CFG", "W4A8_MXFP4_FP8_CFG", "MXFP6_DEFAULT_CFG", "NVFP4_MLP_WEIGHT_ONLY_CFG",
                    "INT8_WEIGHT_ONLY_CFG")


def _modelopt(orig: Path, schemes: list[str] | None) -> dict[str, str]:
    import copy

    import modelopt.torch.quantization as mtq
    import torch
    from modelopt.torch.export import export_hf_checkpoint

    calib = _calib()

    def loop(model):  # noqa: ANN001, ANN202
        with torch.no_grad():
            for x in calib:
                model(x)

    done = {}
    for name in schemes or MODELOPT_CONFIGS:
        cfg = getattr(mtq, name, None)
        if cfg is None:
            done[name] = "not written: no such config in this ModelOpt"
            continue
        out = OUT / f"modelopt-{name.removesuffix('_CFG').lower()}"
        try:
            cfg = copy.deepcopy(cfg)
            if name in MODELOPT_GROUP_128:  # ModelOpt refuses partial int4 blocks (down_proj: 320 columns)
                cfg["quant_cfg"].append({"quantizer_name": "*down_proj*", "enable": False})
            model = _load(orig)
            model = mtq.quantize(model, cfg, loop)
            if out.exists():
                shutil.rmtree(out)
            export_hf_checkpoint(model, export_dir=out)
            _prune(out)
            done[name] = "written"
        except Exception as e:  # noqa: BLE001
            shutil.rmtree(out, ignore_errors=True)
            done[name] = f"not written: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            traceback.print_exc()
    return done


def _why(e: BaseException) -> str:
    """The exception in one line; a bare assert is named by where it failed (file and function)."""
    if str(e):
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    last = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" in {Path(last.filename).name} {last.name}(): {last.line}" if last else ""
    return f"{type(e).__name__}{at}"


def _quark(orig: Path, schemes: list[str] | None) -> dict[str, str]:
    import torch
    from quark.torch import LLMTemplate, ModelQuantizer, export_safetensors

    template = LLMTemplate.get("llama")
    names = schemes or list(template.get_supported_schemes())
    calib = _calib()
    done = {}
    for scheme in names:
        out = OUT / f"quark-{scheme.lower()}"
        why = ""
        for exclude in (["lm_head"], ["lm_head", "*down_proj*"]):  # then without down_proj's 320 columns
            try:
                model = _load(orig)
                config = template.get_config(scheme=scheme, exclude_layers=exclude)
                q = ModelQuantizer(config)
                model = q.quantize_model(model, calib)
                model = q.freeze(model)
                if out.exists():
                    shutil.rmtree(out)
                with torch.no_grad():
                    export_safetensors(model, output_dir=str(out))
                _prune(out)
                why = "written" + (" (down_proj left unquantized)" if len(exclude) > 1 else "")
                break
            except Exception as e:  # noqa: BLE001
                shutil.rmtree(out, ignore_errors=True)
                why = f"not written: {_why(e)}"
                traceback.print_exc()
        done[scheme] = why
    return done


def _ct_own_dequant(names: list[str] | None = None) -> None:
    """compressed-tensors' own decompression of every llm-compressor fixture, in float32: the SHA-256 of
    each dequantized weight's bytes goes to OWN_DEQUANT.json (the tests compare fmtsim's output)."""
    import hashlib

    import torch
    from compressed_tensors.compressors.base import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme
    from safetensors.torch import load_file

    for d in sorted(OUT.glob("llmcompressor-*")):
        if names and d.name not in names:
            continue
        cfg = json.loads((d / "config.json").read_text())["quantization_config"]
        tensors = load_file(str(d / "model.safetensors"))
        out = {}
        for group in cfg["config_groups"].values():
            fmt = group.get("format") or cfg["format"]
            scheme = QuantizationScheme(targets=group["targets"], weights=group.get("weights"),
                                        input_activations=group.get("input_activations"))
            comp = BaseCompressor.load_from_registry(fmt)
            layers = sorted({k.rsplit(".", 1)[0] for k in tensors if k.endswith((".weight_scale",))})
            for layer in layers:
                local = {k[len(layer) + 1:]: v for k, v in tensors.items() if k.startswith(layer + ".")
                         and "." not in k[len(layer) + 1:]}
                try:
                    dense = comp.decompress(local, scheme)
                except Exception as e:  # noqa: BLE001
                    out[layer + ".weight"] = f"not decompressed: {type(e).__name__}: {e}"[:200]
                    continue
                w = dense["weight"].to(torch.float32).contiguous().numpy()
                out[layer + ".weight"] = hashlib.sha256(w.tobytes()).hexdigest()
        (d / "OWN_DEQUANT.json").write_text(json.dumps({"float32_sha256": out}, indent=1, sort_keys=True) + "\n")
        print(d.name, len(out))


def _ct_pack_vectors() -> None:
    """compressed-tensors' own ``pack_to_int32`` on small seeded codes (rows that end mid-word, a zero
    point packed along dim 0) for 2, 3, 4 and 8 bits: ``ct_pack_vectors.json`` (the tests hold fmtsim's
    dense unpacking to it)."""
    import torch
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32

    g = torch.Generator().manual_seed(SEED + 2)
    out = []
    for bits in (2, 3, 4, 8):
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1))
        q = torch.randint(lo, hi, (3, 13), generator=g, dtype=torch.int8)
        zp = torch.randint(lo, hi, (5, 3), generator=g, dtype=torch.int8)
        out.append({"bits": bits, "codes": q.tolist(), "packed": pack_to_int32(q, bits).tolist(),
                    "zero_point": zp.tolist(), "zero_point_packed": pack_to_int32(zp, bits, packed_dim=0).tolist()})
    doc = {"compressed-tensors": _versions(("compressed-tensors",)).strip(), "vectors": out}
    (OUT / "ct_pack_vectors.json").write_text(json.dumps(doc, indent=1) + "\n")


def _quark_own_dequant(names: list[str] | None = None) -> None:
    """Quark's own reading of every Quark fixture: ``import_model_from_safetensors`` rebuilds the model with
    Quark's QParamsLinear modules from the exported files, and each module's weight quantizer dequantizes
    its weight (``_get_qweight``, the weight its forward uses). The SHA-256 of each weight's float32 bytes,
    and the dtype Quark returned, go to OWN_DEQUANT.json."""
    import hashlib

    import torch
    from quark.torch import import_model_from_safetensors

    for d in sorted(OUT.glob("quark-*")):
        if names and d.name not in names:
            continue
        out: dict[str, str] = {}
        dtypes: set[str] = set()
        try:
            model = import_model_from_safetensors(None, str(d), device="cpu")
        except Exception as e:  # noqa: BLE001 - recorded: Quark cannot read back its own export
            out["*"] = f"not imported: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            model = None
        for name, mod in (model.named_modules() if model is not None else ()):
            if not hasattr(mod, "_get_qweight") or getattr(mod, "weight_quantizer", None) is None:
                continue
            try:
                with torch.no_grad():
                    w = mod._get_qweight(mod.weight)
            except Exception as e:  # noqa: BLE001
                out[name + ".weight"] = f"not dequantized: {type(e).__name__}: {e}"[:200]
                continue
            dtypes.add(str(w.dtype).removeprefix("torch."))
            out[name + ".weight"] = hashlib.sha256(w.to(torch.float32).contiguous().numpy().tobytes()).hexdigest()
        (d / "OWN_DEQUANT.json").write_text(json.dumps({"float32_sha256": out, "producer_dtype": sorted(dtypes)},
                                                       indent=1, sort_keys=True) + "\n")
        print(d.name, len(out), sorted(dtypes))


def _modelopt_own_dequant(names: list[str] | None = None) -> None:
    """ModelOpt's own dequantization of each ModelOpt fixture: its QTensor classes (``torch/quantization/
    qtensor``: FP8QTensor, NVFP4QTensor, MXFP4QTensor, MXFP8QTensor, INT8QTensor) built on the exported
    codes and given the exported scales as their ``dequantize`` takes them (a per-channel scale as a
    column, 2-D block scales as [out/128, in/128] with ``block_sizes``), in float32. ModelOpt has no
    reader for its W4A16_AWQ export (``pack_int4_in_uint8`` is not INT4QTensor's packing): recorded as
    such. A pre_quant_scale stays the input's multiplier in ModelOpt: q * s only."""
    import hashlib

    import torch
    from modelopt.torch.quantization.qtensor import (
        FP8QTensor,
        INT8QTensor,
        MXFP4QTensor,
        MXFP8QTensor,
        NVFP4QTensor,
    )
    from safetensors.torch import load_file

    f32 = torch.float32
    for d in sorted(OUT.glob("modelopt-*")):
        if names and d.name not in names:
            continue
        t = load_file(str(d / "model.safetensors"))
        out: dict[str, str] = {}
        for sname in sorted(k for k in t if k.endswith(".weight_scale")):
            layer = sname.removesuffix(".weight_scale")
            w, s = t[layer + ".weight"], t[sname]
            try:
                if w.dtype == torch.float8_e4m3fn and s.dtype == torch.uint8:
                    v = MXFP8QTensor(w.shape, f32, w).dequantize(f32, scale=s)
                elif w.dtype == torch.float8_e4m3fn:
                    if s.ndim == 4:
                        v = FP8QTensor(w.shape, f32, w).dequantize(
                            f32, scale=s.reshape(s.shape[0], s.shape[2]), block_sizes={-1: 128, -2: 128})
                    else:
                        v = FP8QTensor(w.shape, f32, w).dequantize(f32, scale=s.reshape(-1, 1) if s.ndim else s)
                elif w.dtype == torch.uint8 and s.dtype == torch.float8_e4m3fn:
                    shape = (w.shape[0], w.shape[1] * 2)
                    v = NVFP4QTensor(shape, f32, w).dequantize(f32, scale=s, double_scale=t[layer + ".weight_scale_2"],
                                                               block_sizes={-1: shape[1] // s.shape[1]})
                elif w.dtype == torch.uint8 and s.dtype == torch.uint8:
                    shape = (w.shape[0], w.shape[1] * 2)
                    v = MXFP4QTensor(shape, f32, w).dequantize(f32, scale=s, block_sizes={-1: 32})
                elif w.dtype == torch.int8:
                    v = INT8QTensor(w.shape, f32, w).dequantize(f32, scale=s.reshape(-1, 1) if s.ndim else s)
                else:
                    out[layer + ".weight"] = f"no ModelOpt reader: {w.dtype} codes, {s.dtype} scales {list(s.shape)}"
                    continue
            except Exception as e:  # noqa: BLE001
                out[layer + ".weight"] = f"not dequantized: {_why(e)}"[:200]
                continue
            out[layer + ".weight"] = hashlib.sha256(v.to(f32).contiguous().numpy().tobytes()).hexdigest()
        (d / "OWN_DEQUANT.json").write_text(json.dumps({"float32_sha256": out, "producer_dtype": ["float32"]},
                                                       indent=1, sort_keys=True) + "\n")
        print(d.name, len(out))


WORKERS = {"llmcompressor": (_llmcompressor, ("llmcompressor", "compressed-tensors", "transformers", "torch")),
           "modelopt": (_modelopt, ("nvidia-modelopt", "transformers", "torch")),
           "quark": (_quark, ("amd-quark", "transformers", "torch"))}


def worker(name: str, schemes: list[str] | None) -> None:
    orig = OUT / "original"
    if not (orig / "model.safetensors").exists():
        orig.mkdir(parents=True, exist_ok=True)
        build_original(orig)
    fn, pkgs = WORKERS[name]
    done = fn(orig, schemes)
    versions = _versions(pkgs)
    for d in OUT.glob(f"{name}-*"):
        if d.is_dir():
            (d / "VERSIONS").write_text(versions)
    log = OUT / f"SCHEMES-{name}.txt"
    old = dict(line.split(": ", 1) for line in log.read_text().splitlines() if ": " in line) if log.exists() else {}
    old.update(done)
    log.write_text(versions + "".join(f"{k}: {v}\n" for k, v in sorted(old.items())))
    print(json.dumps(done, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venvs", default=os.environ.get("FMTSIM_PRODUCER_VENVS", "/work/pvenvs"))
    ap.add_argument("--only", default=",".join(PRODUCERS), help="comma-separated producers")
    ap.add_argument("--schemes", help="comma-separated schemes (one producer only)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--model", choices=sorted(MODELS), default="tiny",
                    help="tiny: producers/; edge: producers/edge/ (edge weights); large: producers/large/")
    a = ap.parse_args()
    global OUT, MODEL
    MODEL = a.model
    if MODEL != "tiny":
        OUT = OUT / MODEL
    schemes = a.schemes.split(",") if a.schemes else None
    if a.worker == "ct-own-dequant":
        _ct_own_dequant(schemes)
        _ct_pack_vectors()
        return 0
    if a.worker == "modelopt-own-dequant":
        _modelopt_own_dequant(schemes)
        return 0
    if a.worker == "quark-own-dequant":
        _quark_own_dequant(schemes)
        return 0
    if a.worker:
        worker(a.worker, schemes)
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    rc = 0
    for name in a.only.split(","):
        py = Path(a.venvs) / name / "bin" / "python"
        if not py.exists():
            print(f"{name}: no venv at {py.parent.parent}; skipped", file=sys.stderr)
            rc = 1
            continue
        cmd = [str(py), __file__, "--worker", name, "--model", MODEL] + (["--schemes", a.schemes] if a.schemes else [])
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH="")
        if subprocess.run(cmd, env=env).returncode:
            rc = 1
        own = {"llmcompressor": "ct-own-dequant", "modelopt": "modelopt-own-dequant",
               "quark": "quark-own-dequant"}.get(name)
        if own and subprocess.run([str(py), __file__, "--worker", own, "--model", MODEL], env=env).returncode:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
