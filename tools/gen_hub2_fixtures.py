"""Checkpoints as optimum-quanto, HQQ and torchao write them: the fixtures tests/fixtures/hub/<lib>-<variant>/.

    /work/pvenvs/quanto/bin/python  tools/gen_hub2_fixtures.py --lib quanto
    /work/pvenvs/hqq/bin/python     tools/gen_hub2_fixtures.py --lib hqq
    /work/pvenvs/torchao/bin/python tools/gen_hub2_fixtures.py --lib torchao

One venv per library (``python3 -m venv /work/pvenvs/NAME``, then ``pip install torch==2.13.0`` first, the CPU
wheel on this machine's disk, then): ``optimum-quanto==0.2.7 transformers``; ``hqq==0.2.8 transformers``
(brings accelerate); ``torchao==0.18.0 transformers``. Everything runs on the CPU.

One tiny Llama-like model for all (``LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=1,
num_attention_heads=4, num_key_value_heads=2, vocab_size=64)``), bfloat16, its parameters filled from a seeded
``torch.Generator`` in sorted name order (so every venv's transformers gives the same weights). Each library
quantizes it with its own API and writes it with its own writer:

* quanto: ``QuantizedModelForCausalLM.quantize(model, weights=..., exclude='lm_head')`` (``quantize`` +
  ``freeze``, lm_head left out as in optimum-quanto's README) and
  ``.save_pretrained`` -> config.json, model.safetensors, quanto_qmap.json;
* hqq: ``AutoHQQHFModel.quantize_model(model, BaseQuantizeConfig(nbits, group_size=64), bfloat16, 'cpu')`` and
  ``AutoHQQHFModel.save_to_safetensors`` -> config.json, model.safetensors (``save_quantized`` writes a torch
  pickle, qmodel.pt, not safetensors);
* torchao: transformers ``from_pretrained(..., quantization_config=TorchAoConfig(<torchao config>))`` on the
  CPU and ``save_pretrained`` (safetensors through ``torchao.prototype.safetensors.flatten_tensor_state_dict``)
  -> config.json, model.safetensors.

Only config.json, the library's own JSON and the *.safetensors are kept. For every quantized Linear the
library's own dequantization goes to ``own_dequant.json`` as the SHA-256 of the raw bits of its output
(uint16 for bfloat16 / float16, uint32 for float32), keyed ``<module>.weight``, shape [out, in]. Each
variant is read back with the library's own loader and its dequantization compared bit for bit with the
one recorded (a mismatch is printed).
A variant that cannot be quantized or saved on the CPU is recorded with its error in ``HUB2_VERSIONS``, which
also holds the package versions per library. None of these libraries is a dependency of fmtsim.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204
LLAMA = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=64)
QUANTO = ["qint8", "qint4", "qint2", "qfloat8"]
HQQ = [1, 2, 3, 4, 5, 6, 8]  # 5 and 6 bits are stored one code per byte ("8bit_u8")
TORCHAO = ["int8wo", "fp8wo", "int4wo-g32", "int4wo-g32-plain_int32", "int4wo-g32-tile_packed_to_4d",
           "int4wo-g32-preshuffled", "intx4-g32", "mxfp8", "mxfp4", "nvfp4wo", "nvfp4"]


def _bits(t):  # noqa: ANN001, ANN202 - a torch tensor -> the raw bits of its values, as numpy
    import torch

    view = {torch.bfloat16: torch.uint16, torch.float16: torch.uint16, torch.float32: torch.uint32}[t.dtype]
    return t.detach().contiguous().view(view).cpu().numpy()


def _model():  # noqa: ANN202
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(**LLAMA)).to(torch.bfloat16).eval()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            p.copy_(1.0 + 0.1 * r if name.endswith("norm.weight") else 0.05 * r)
    return model


def _keep(src: Path, dest: Path, jsons: tuple) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in sorted(src.iterdir()):
        if f.suffix == ".safetensors" or f.name in ("config.json", *jsons):
            shutil.copy(f, dest / f.name)
            (dest / f.name).chmod(0o644)


def _same(a: dict, b: dict) -> list:
    import numpy as np

    return sorted(k for k in a if k not in b or a[k].shape != b[k].shape or not np.array_equal(a[k], b[k]))


# ---------------------------------------------------------------------------------------------- quanto
def run_quanto(out: Path) -> tuple[dict, dict]:
    import optimum.quanto as oq
    from optimum.quanto import QuantizedModelForCausalLM, WeightQBitsTensor, WeightQBytesTensor, qtypes
    from safetensors.torch import load_file

    made, failed = {}, {}
    for qt in QUANTO:
        name = f"quanto-{qt}"
        try:
            model = _model()
            qmodel = QuantizedModelForCausalLM.quantize(model, weights=qtypes[qt], exclude="lm_head")
            own = {}
            for mod_name, mod in model.named_modules():
                if isinstance(mod, oq.QModuleMixin) and mod.weight_qtype is not None:
                    own[mod_name + ".weight"] = _bits(mod.weight.dequantize())
            with tempfile.TemporaryDirectory() as tmp:
                qmodel.save_pretrained(tmp)
                _keep(Path(tmp), out / name, ("quanto_qmap.json",))
            # Read back: the kernel-agnostic WeightQBits/QBytesTensor built from the file, dequantized by quanto
            sd = load_file(out / name / "model.safetensors")
            qmap = json.loads((out / name / "quanto_qmap.json").read_text())
            back = {}
            for mod_name, q in qmap.items():
                qtype = qtypes[q["weights"]]
                w = model.get_submodule(mod_name).weight
                pre = mod_name + ".weight."
                if qtype.bits == 8:
                    t = WeightQBytesTensor.load_from_state_dict(dict(sd), pre, qtype, 0, w.size(), w.stride(), None, [])
                else:
                    gs = model.get_submodule(mod_name).weight_group_size
                    t = WeightQBitsTensor.load_from_state_dict(dict(sd), pre, qtype, 0, gs, w.size(), w.stride(), [])
                back[mod_name + ".weight"] = _bits(t.dequantize())
            bad = _same(own, back)
            # And the library's own reload (requantize, which re-optimizes for the CPU) for the record
            model2 = _model()
            oq.requantize(model2, load_file(out / name / "model.safetensors"), qmap, device="cpu")
            again = {k + ".weight": _bits(model2.get_submodule(k).weight.dequantize()) for k in qmap}
            drift = _same(own, again)
            _save_npz(out / name, own)
            made[name] = f"{len(own)} layers" + (f"; FILE READBACK MISMATCH {bad}" if bad else "") + (
                f"; requantize() reload differs in {drift}" if drift else "")
        except Exception as e:  # noqa: BLE001
            failed[name] = _err(e)
    return made, failed


# ---------------------------------------------------------------------------------------------- hqq
def run_hqq(out: Path) -> tuple[dict, dict]:
    import torch
    from hqq.core.quantize import BaseQuantizeConfig, HQQLinear
    from hqq.models.hf.base import AutoHQQHFModel
    from safetensors.torch import load_file

    made, failed = {}, {}
    for nbits in HQQ:
        name = f"hqq-{nbits}bit-g64"
        try:
            model = _model()
            AutoHQQHFModel.quantize_model(model, quant_config=BaseQuantizeConfig(nbits=nbits, group_size=64),
                                          compute_dtype=torch.bfloat16, device="cpu")
            own = {n + ".weight": _bits(m.dequantize()) for n, m in model.named_modules() if isinstance(m, HQQLinear)}
            with tempfile.TemporaryDirectory() as tmp:
                AutoHQQHFModel.save_to_safetensors(model, tmp, verbose=False)
                _keep(Path(tmp), out / name, ())
            sd = load_file(out / name / "model.safetensors")
            back = {}
            for key in own:
                pre = key[: -len("weight")]
                layer = HQQLinear(None, None, compute_dtype=torch.bfloat16, device="cpu", initialize=False)
                layer.load_state_dict({k[len(pre):]: v for k, v in sd.items() if k.startswith(pre)})
                back[key] = _bits(layer.dequantize())
            bad = _same(own, back)
            _save_npz(out / name, own)
            made[name] = f"{len(own)} layers" + (f"; FILE READBACK MISMATCH {bad}" if bad else "")
        except Exception as e:  # noqa: BLE001
            failed[name] = _err(e)
    return made, failed


# ---------------------------------------------------------------------------------------------- torchao
def _torchao_config(v: str):  # noqa: ANN202
    import torch
    from torchao.quantization import (
        Float8WeightOnlyConfig,
        Int4WeightOnlyConfig,
        Int8WeightOnlyConfig,
        IntxWeightOnlyConfig,
        PerGroup,
    )

    if v == "int8wo":
        return Int8WeightOnlyConfig()
    if v == "fp8wo":
        return Float8WeightOnlyConfig()
    if v.startswith("int4wo-g32"):  # the default packing format is "plain" (Int4Tensor)
        fmt = v[len("int4wo-g32-"):]
        return Int4WeightOnlyConfig(group_size=32, **({"int4_packing_format": fmt} if fmt else {}))
    if v == "intx4-g32":
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32))
    from torchao.prototype.mx_formats import (
        MXDynamicActivationMXWeightConfig,
        NVFP4DynamicActivationNVFP4WeightConfig,
        NVFP4WeightOnlyConfig,
    )

    if v == "mxfp8":
        return MXDynamicActivationMXWeightConfig(activation_dtype=torch.float8_e4m3fn, weight_dtype=torch.float8_e4m3fn)
    if v == "mxfp4":
        return MXDynamicActivationMXWeightConfig(activation_dtype=torch.float4_e2m1fn_x2,
                                                 weight_dtype=torch.float4_e2m1fn_x2)
    if v == "nvfp4wo":
        return NVFP4WeightOnlyConfig()
    if v == "nvfp4":
        return NVFP4DynamicActivationNVFP4WeightConfig()
    raise ValueError(v)


def run_torchao(out: Path) -> tuple[dict, dict]:
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file
    from torchao.prototype.safetensors.safetensors_support import unflatten_tensor_state_dict
    from torchao.utils import TorchAOBaseTensor
    from transformers import LlamaForCausalLM, TorchAoConfig

    made, failed = {}, {}
    with tempfile.TemporaryDirectory() as base:
        _model().save_pretrained(base)
        for v in TORCHAO:
            name = f"torchao-{v}"
            stage = "config"
            try:
                q = TorchAoConfig(quant_type=_torchao_config(v))
                stage = "quantize (from_pretrained)"
                model = LlamaForCausalLM.from_pretrained(base, quantization_config=q, device_map="cpu",
                                                         dtype=torch.bfloat16)
                own = {}
                for mod_name, mod in model.named_modules():
                    if isinstance(mod, torch.nn.Linear) and isinstance(mod.weight, TorchAOBaseTensor):
                        own[mod_name + ".weight"] = _bits(mod.weight.dequantize())
                if not own:
                    raise RuntimeError("no Linear weight became a torchao tensor subclass")
                stage = "save_pretrained"
                with tempfile.TemporaryDirectory() as tmp:
                    model.save_pretrained(tmp, safe_serialization=True)
                    _keep(Path(tmp), out / name, ())
                stage = "read back"
                f = out / name / "model.safetensors"
                with safe_open(f, "pt") as h:
                    meta = h.metadata()
                rebuilt, _ = unflatten_tensor_state_dict(load_file(f), meta)
                back = {k: _bits(rebuilt[k].dequantize()) for k in own}
                bad = _same(own, back)
                _save_npz(out / name, own)
                made[name] = f"{len(own)} layers ({type(model.model.layers[0].mlp.up_proj.weight).__name__})" + (
                    f"; FILE READBACK MISMATCH {bad}" if bad else "")
            except Exception as e:  # noqa: BLE001
                shutil.rmtree(out / name, ignore_errors=True)
                failed[name] = f"{stage}: {_err(e)}"
                # transformers' loading report hides the cause: quantize one Linear directly for it
                try:
                    from torchao.quantization import quantize_

                    lin = torch.nn.Sequential(torch.nn.Linear(128, 128, bias=False)).to(torch.bfloat16)
                    quantize_(lin, _torchao_config(v))
                    failed[name] += "; direct quantize_ on one Linear: no error"
                except Exception as e2:  # noqa: BLE001
                    failed[name] += f"; direct quantize_ on one Linear: {_err(e2)}"
    return made, failed


# ---------------------------------------------------------------------------------------------- common
def _save_npz(dest: Path, own: dict) -> None:
    """The library's own dequantization as digests: own_dequant.json maps each ``<module>.weight`` to the
    shape and the SHA-256 of its raw bits (uint16 for bfloat16), which keeps the fixtures small (the
    values themselves, about 300 KB a variant, compress poorly); a reader's output is hashed the same way."""
    import hashlib
    import json

    import numpy as np

    digests = {key: {"shape": list(own[key].shape), "bits": str(own[key].dtype),
                     "sha256": hashlib.sha256(np.ascontiguousarray(own[key]).tobytes()).hexdigest()}
               for key in sorted(own)}
    (dest / "own_dequant.json").write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    (dest / "own_dequant.npz").unlink(missing_ok=True)


def _err(e: Exception) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-1]
    msg = str(e).strip().split("\n")[0][:300]
    return f"{type(e).__name__}: {msg} (raised at {Path(tb.filename).name}:{tb.lineno} in {tb.name})"


def _versions(lib: str) -> str:
    from importlib.metadata import version

    pkgs = {"quanto": ["optimum-quanto"], "hqq": ["hqq", "accelerate"], "torchao": ["torchao"]}[lib]
    return " ".join(f"{p} {version(p)}" for p in pkgs + ["transformers", "torch", "safetensors", "numpy"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, choices=["quanto", "hqq", "torchao"])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "hub")
    ap.add_argument("--only", nargs="*", metavar="VARIANT",
                    help=f"a subset: quanto {QUANTO}, hqq nbits {HQQ}, torchao {TORCHAO} (default: all; "
                         "the library's HUB2_VERSIONS block then lists only the subset)")
    args = ap.parse_args()
    if args.only:
        keep = set(args.only)
        QUANTO[:] = [v for v in QUANTO if v in keep]
        HQQ[:] = [v for v in HQQ if str(v) in keep]
        TORCHAO[:] = [v for v in TORCHAO if v in keep]
    args.out.mkdir(parents=True, exist_ok=True)
    made, failed = {"quanto": run_quanto, "hqq": run_hqq, "torchao": run_torchao}[args.lib](args.out)
    for k, v in made.items():
        print("made", k, v)
    for k, v in failed.items():
        print("NOT MADE", k, v)
    # HUB2_VERSIONS: one block per library, the other libraries' blocks kept as they are
    vf = args.out / "HUB2_VERSIONS"
    blocks = {}
    if vf.exists():
        cur = None
        for line in vf.read_text().splitlines():
            if line.startswith("[") and line.endswith("]"):
                cur = line[1:-1]
                blocks[cur] = []
            elif cur is not None and line.strip():
                blocks[cur].append(line)
    blocks[args.lib] = [_versions(args.lib)] + [f"made {k}" for k in made] + [
        f"not made {k}: {v}" for k, v in failed.items()]
    text = "".join(f"[{lib}]\n" + "\n".join(blocks[lib]) + "\n\n" for lib in ("quanto", "hqq", "torchao")
                   if lib in blocks)
    vf.write_text(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
