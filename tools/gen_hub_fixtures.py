"""Checkpoints as bitsandbytes writes them: the fixtures under tests/fixtures/hub/.

    /work/venv-bnb/bin/python tools/gen_hub_fixtures.py [--out DIR]

The venv: ``python3 -m venv --system-site-packages /work/venv-bnb`` then ``pip install bitsandbytes==0.50.2
transformers accelerate`` (checked with torch 2.13.0+cpu, transformers 5.24.0, accelerate 1.16.0). One tiny
Llama-like model with random bfloat16 weights (hidden 64, intermediate 96, one layer, vocabulary 16) is
written to a temporary folder, then loaded by transformers with each ``BitsAndBytesConfig`` below on the CPU
and saved with ``save_pretrained`` into ``bnb-<scheme>/`` (config.json and model.safetensors kept). For
every quantized Linear the library's own dequantization (``bitsandbytes.functional.dequantize_4bit`` with
the layer's quant_state; ``int8_vectorwise_dequant`` for LLM.int8) goes to ``bnb-<scheme>/own_dequant.npz``
as the raw bits of its output (uint16 for bfloat16, uint32 for float32), the answer a reader must give.
``VERSIONS`` records the package versions. bitsandbytes is not a dependency of fmtsim: nothing here is
imported by the package or the tests.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261202
SCHEMES = {  # name -> BitsAndBytesConfig keyword arguments
    "nf4": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    "fp4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4", "bnb_4bit_use_double_quant": True},
    "nf4-dq": {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True},
    "int8": {"load_in_8bit": True},
}


def _bits(t):  # noqa: ANN001, ANN202 - a torch tensor -> the raw bits of its values, as numpy
    import torch

    view = {torch.bfloat16: torch.uint16, torch.float16: torch.uint16, torch.float32: torch.uint32}[t.dtype]
    return t.contiguous().view(view).numpy()


def main() -> None:
    import bitsandbytes as bnb
    import numpy as np
    import torch
    import transformers
    from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "hub")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=32, vocab_size=16, max_position_embeddings=32,
                      tie_word_embeddings=True)
    torch.manual_seed(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp)
        for name, kw in SCHEMES.items():
            q = BitsAndBytesConfig(bnb_4bit_compute_dtype=torch.bfloat16, **kw)
            model = LlamaForCausalLM.from_pretrained(tmp, quantization_config=q, device_map="cpu", dtype=torch.bfloat16)
            dest = args.out / f"bnb-{name}"
            shutil.rmtree(dest, ignore_errors=True)
            with tempfile.TemporaryDirectory() as saved:
                model.save_pretrained(saved)
                dest.mkdir()
                for keep in ("config.json", "model.safetensors"):
                    shutil.copy(Path(saved) / keep, dest / keep)
            own = {}
            with torch.no_grad():
                for mod_name, mod in model.named_modules():
                    if isinstance(mod, bnb.nn.Linear4bit):
                        w = mod.weight
                        own[mod_name + ".weight"] = _bits(bnb.functional.dequantize_4bit(w.data, w.quant_state))
                    elif isinstance(mod, bnb.nn.Linear8bitLt):
                        w = mod.weight
                        own[mod_name + ".weight"] = _bits(bnb.functional.int8_vectorwise_dequant(w.data, w.SCB))
            np.savez(dest / "own_dequant.npz", **own)
            print(name, len(own), "layers")
    (args.out / "VERSIONS").write_text(f"bitsandbytes {bnb.__version__}\ntransformers {transformers.__version__}\n"
                                       f"torch {torch.__version__}\n")


if __name__ == "__main__":
    main()
