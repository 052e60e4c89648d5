"""GPTQ checkpoints as gptqmodel writes them on the CPU: the gptq-* fixtures under tests/fixtures/hub/.

    GPTQMODEL_CPU_WORKERS=2 /work/pvenvs/gptq/bin/python tools/gen_gptq_fixtures.py [--out DIR] [--only NAME ...]

The venv (gptqmodel 7.7.0 asks for torch>=2.14.1 but runs on the CPU with 2.13, so it goes in with --no-deps
and its runtime imports are added by hand)::

    python3 -m venv /work/pvenvs/gptq
    /work/pvenvs/gptq/bin/pip install torch==2.13.0            # the CPU wheel
    /work/pvenvs/gptq/bin/pip install --no-deps gptqmodel==7.7.0
    /work/pvenvs/gptq/bin/pip install -c <(echo torch==2.13.0) pypcre logbar device-smi threadpoolctl \\
        safetensors transformers accelerate tokenicer packaging numpy
    /work/pvenvs/gptq/bin/pip install --no-deps defuser pillow requests urllib3 certifi charset-normalizer

One tiny Llama-like model with random bfloat16 weights (hidden 64, intermediate 128, one layer, 2 heads of
32, one KV head, vocabulary 64, tied embeddings, biases on q/k/v/o but not on the MLP; every Linear has in
and out features divisible by 32, as gptqmodel's block packer and 3-bit layout need) and a word-level
tokenizer (gptqmodel loads one) are written to a temporary folder. The first input group (32 columns) of
q_proj's first 3 rows is made all-positive, so that an asymmetric quantizer gives those groups a zero point
of 0: the case where the v1 "zero minus one" layout borrows from the next packed field.

Each VARIANTS entry is quantized by gptqmodel (GPTQ, 8 random calibration sequences of 32 tokens, batch 1)
on the CPU and written with gptqmodel's own ``save``; ``gptq-<variant>/`` keeps config.json,
quantize_config.json and the safetensors. The saved folder is loaded back by gptqmodel with the plain
torch kernel (BACKEND.GPTQ_TORCH, i.e. TorchLinear) in dtype "auto" (the checkpoint's bfloat16), and each
quantized Linear's own ``dequantize_weight()`` (it returns [in, out]), transposed to nn.Linear's
[out, in], goes to ``gptq-<variant>/own_dequant.npz`` as the raw bits of its values (uint16 for
bfloat16/float16, uint32 for float32): the answer a reader must give.

Checks made here, printed and not stored: the answer (and that of a float16 load) against a
straightforward reading of the safetensors (an LSB-first bit stream of int32 words, v1 zeros + 1 added to
each packed word, bf16(bf16(scale) * (q - z)) or fp16(scale * (q - z))), which must agree; and against
gptqmodel's other dequantizer (gptqmodel.utils.model_dequant.convert_gptq_file), which does not always.
A variant gptqmodel cannot make is reported with its error and skipped. ``GPTQ_VERSIONS`` records the
package versions and what was made. gptqmodel is not a dependency of fmtsim: nothing here is imported by
the package or the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import traceback
from pathlib import Path

os.environ.setdefault("GPTQMODEL_CPU_WORKERS", "2")

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204
GROUP_SIZE = 32
CALIBRATION_SEQUENCES, CALIBRATION_TOKENS = 8, 32
VOCAB = 64
POSITIVE_ROWS = 3  # q_proj rows whose first input group is made all-positive (asymmetric zero point 0)
VARIANTS = {  # name -> QuantizeConfig keyword arguments (group_size=32 for all)
    "4bit": {"bits": 4, "sym": True, "desc_act": False, "format": "gptq"},
    "4bit-desc_act": {"bits": 4, "sym": True, "desc_act": True, "format": "gptq"},
    "4bit-asym": {"bits": 4, "sym": False, "desc_act": False, "format": "gptq"},
    "8bit": {"bits": 8, "sym": True, "desc_act": False, "format": "gptq"},
    "3bit": {"bits": 3, "sym": True, "desc_act": False, "format": "gptq"},
    "3bit-asym": {"bits": 3, "sym": False, "desc_act": False, "format": "gptq"},
    "2bit": {"bits": 2, "sym": True, "desc_act": False, "format": "gptq"},
    "4bit-v2": {"bits": 4, "sym": True, "desc_act": False, "format": "gptq_v2"},
    "4bit-asym-v2": {"bits": 4, "sym": False, "desc_act": False, "format": "gptq_v2"},
}
KEPT_FILES = ("config.json", "quantize_config.json")


def _raw_bits(t):  # noqa: ANN001, ANN202 - a torch tensor -> the raw bits of its values, as numpy
    import torch

    view = {torch.bfloat16: torch.uint16, torch.float16: torch.uint16, torch.float32: torch.uint32}[t.dtype]
    return t.contiguous().view(view).numpy()


def write_source_model(folder: Path) -> None:
    """The tiny bfloat16 Llama and a word-level tokenizer for it."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=32, vocab_size=VOCAB, max_position_embeddings=64,
                      tie_word_embeddings=True, attention_bias=True, bos_token_id=1, eos_token_id=2,
                      pad_token_id=3)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        q = model.model.layers[0].self_attn.q_proj.weight
        block = q[:POSITIVE_ROWS, :GROUP_SIZE]
        block.copy_(block.abs() + block.abs().mean())
    model.save_pretrained(folder)
    words = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="t0", bos_token="t1", eos_token="t2",
                            pad_token="t3").save_pretrained(folder)


def calibration_set() -> list[dict]:
    import torch

    gen = torch.Generator().manual_seed(SEED + 1)
    shape = (1, CALIBRATION_TOKENS)
    return [{"input_ids": torch.randint(0, VOCAB, shape, generator=gen),
             "attention_mask": torch.ones(shape, dtype=torch.long)} for _ in range(CALIBRATION_SEQUENCES)]


def quantize_and_save(source: Path, options: dict, saved: Path) -> None:
    """gptqmodel's GPTQ on the CPU and its own save (which also writes the tokenizer it loads back)."""
    from gptqmodel import GPTQModel, QuantizeConfig

    qcfg = QuantizeConfig(group_size=GROUP_SIZE, offload_to_disk=False, **options)
    model = GPTQModel.load(str(source), qcfg, device="cpu")
    model.quantize(calibration_set(), batch_size=1)
    model.save(str(saved))


def keep_reader_files(saved: Path, dest: Path) -> None:
    """Only the files a reader needs: config.json, quantize_config.json and the safetensors."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for f in sorted(saved.iterdir()):
        if f.name in KEPT_FILES or f.suffix == ".safetensors":
            shutil.copy(f, dest / f.name)


def own_dequantization(folder: Path, dtype="auto") -> dict:  # noqa: ANN001
    """gptqmodel's own answer: the saved folder loaded back with the torch kernel, each quantized Linear's
    dequantize_weight() ([in, out]) transposed to [out, in]. Returns name -> torch tensor."""
    import torch
    from gptqmodel import BACKEND, GPTQModel
    from gptqmodel.nn_modules.qlinear import BaseQuantLinear

    model = GPTQModel.load(str(folder), device="cpu", backend=BACKEND.GPTQ_TORCH, dtype=dtype)
    own = {}
    with torch.no_grad():
        for name, module in model.model.named_modules():
            if isinstance(module, BaseQuantLinear):
                compiled = module.dequantize_weight()  # what forward() uses (torch.compile'd by optimize())
                eager = type(module).dequantize_weight(module)
                assert torch.equal(compiled.view(torch.int16), eager.view(torch.int16)), name
                own[name + ".weight"] = compiled.T.contiguous()
    return own


# ---- a straightforward reading of the files, to hold gptqmodel's answer to --------------------------------


def unpack_stream(words, bits: int, axis: int):  # noqa: ANN001, ANN201
    """int32 words along axis -> the bits-wide codes of their LSB-first bit stream (word k holds stream bits
    32k..32k+31; code j is stream bits j*bits..j*bits+bits-1; for 3 bits a code may span two words)."""
    import numpy as np

    w = np.ascontiguousarray(np.moveaxis(words.view(np.uint32), axis, -1))
    stream = np.unpackbits(w[..., None].view(np.uint8), axis=-1, bitorder="little").reshape(*w.shape[:-1], -1)
    fields = stream.reshape(*stream.shape[:-1], -1, bits)
    codes = (fields.astype(np.int64) << np.arange(bits)).sum(-1)
    return np.moveaxis(codes, -1, axis)


def v1_to_true_zeros(qzeros, bits: int):  # noqa: ANN001, ANN201
    """gptqmodel's load-side v1 -> v2: for 2/4/8 bits one 1 per field is added to the whole int32 word
    (mod 2**32, so a borrow the save-side subtraction made is undone); for 3 bits each field goes +1 mod 8."""
    import numpy as np

    if bits == 3:
        return (unpack_stream(qzeros, 3, axis=1) + 1) & 7
    ones = sum(1 << (bits * j) for j in range(32 // bits))
    return unpack_stream((qzeros.view(np.uint32) + np.uint32(ones)).view(np.int32), bits, axis=1)


def round_to_bf16(x):  # noqa: ANN001, ANN201 - float32 -> bfloat16 bits, round to nearest even
    import numpy as np

    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):  # noqa: ANN001, ANN201
    import numpy as np

    return (bits.astype(np.uint32) << 16).view(np.float32)


def straightforward_dequant(tensors: dict, prefix: str, quant: dict, load_dtype: str):  # noqa: ANN201
    """[out, in] bits of scales[g_idx] * (q - z) in the load dtype, read from the safetensors alone."""
    import numpy as np

    bits = quant["bits"]
    codes = unpack_stream(tensors[prefix + ".qweight"], bits, axis=0)  # [in, out]
    packed_zeros = tensors[prefix + ".qzeros"]
    if quant["checkpoint_format"] == "gptq":
        zeros = v1_to_true_zeros(packed_zeros, bits)
    else:
        zeros = unpack_stream(packed_zeros, bits, axis=1)
    g = tensors[prefix + ".g_idx"].astype(np.int64)
    steps = (codes - zeros[g]).astype(np.float32)  # small integers, exact
    scales = tensors[prefix + ".scales"].astype(np.float32)  # float16 on disk
    if load_dtype == "bfloat16":  # the module holds bf16(scale); bf16 * int rounds once more
        return round_to_bf16(bf16_to_f32(round_to_bf16(scales))[g] * steps).T.copy()
    return (scales[g] * steps).astype(np.float16).view(np.uint16).T.copy()


def other_gptqmodel_dequant(folder: Path, quant: dict, dtype) -> dict:  # noqa: ANN001
    """gptqmodel.utils.model_dequant.convert_gptq_file: float32 math, then the target dtype."""
    from gptqmodel.utils.model_dequant import convert_gptq_file

    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(convert_gptq_file(f, dtype, quant, "cpu"))
    return out


def check_against_files(folder: Path, own: dict, note_zero_points: bool = True) -> list[str]:
    """Where gptqmodel's own answer differs from a straightforward reading and from its other dequantizer."""
    import numpy as np
    import torch
    from safetensors import safe_open

    quant = json.loads((folder / "config.json").read_text())["quantization_config"]
    tensors = {}  # the GPTQ tensors, as numpy
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(f, framework="pt") as reader:
            for key in reader.keys():
                if key.endswith((".qweight", ".qzeros", ".scales", ".g_idx")):
                    tensors[key] = reader.get_tensor(key).numpy()
    other = other_gptqmodel_dequant(folder, quant, next(iter(own.values())).dtype)
    notes = []
    for name, weight in own.items():
        prefix = name[: -len(".weight")]
        load_dtype = {torch.bfloat16: "bfloat16", torch.float16: "float16"}[weight.dtype]
        mine = straightforward_dequant(tensors, prefix, quant, load_dtype)
        got = _raw_bits(weight)
        if not np.array_equal(mine, got):
            notes.append(f"{name}: straightforward {load_dtype} reading differs in {(mine != got).sum()} values")
        alt = other[name].view(torch.int16)
        if not torch.equal(alt, weight.view(torch.int16)):
            diff = int((alt != weight.view(torch.int16)).sum())
            notes.append(f"{name}: {load_dtype} model_dequant.convert_gptq_file differs in {diff}/{weight.numel()}")
        if note_zero_points and quant["checkpoint_format"] == "gptq" and quant["bits"] != 3:
            bits, stored = quant["bits"], tensors[prefix + ".qzeros"]
            per_field = (unpack_stream(stored, bits, axis=1) + 1) & ((1 << bits) - 1)
            true = v1_to_true_zeros(stored, bits)
            if (per_field != true).any():
                notes.append(f"{prefix}: {(true == 0).sum()} zero point(s) of 0; per-field +1 misreads "
                             f"{(per_field != true).sum()} zero(s) (the save-side whole-word -1 borrowed)")
    return notes


def main() -> None:
    import accelerate
    import gptqmodel
    import numpy as np
    import torch
    import transformers

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "hub")
    ap.add_argument("--only", nargs="*", choices=sorted(VARIANTS), help="variants to make (default: all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    status = {}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        write_source_model(source)
        for name in args.only or VARIANTS:
            dest = args.out / f"gptq-{name}"
            saved = Path(tmp) / f"saved-{name}"
            try:
                quantize_and_save(source, VARIANTS[name], saved)
                own = own_dequantization(saved)
                fp16 = own_dequantization(saved, dtype=torch.float16)
                keep_reader_files(saved, dest)
            except Exception as exc:  # noqa: BLE001 - a variant gptqmodel cannot make is reported, not fatal
                traceback.print_exc()
                shutil.rmtree(dest, ignore_errors=True)
                status[name] = f"not made: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                print(f"gptq-{name}", status[name])
                continue
            np.savez(dest / "own_dequant.npz", **{k: _raw_bits(v) for k, v in own.items()})
            notes = check_against_files(dest, own) + check_against_files(dest, fp16, note_zero_points=False)
            dtypes = sorted({str(v.dtype).removeprefix("torch.") for v in own.values()})
            status[name] = f"made: {len(own)} quantized Linears, own dequantize_weight() returns {'/'.join(dtypes)}"
            print(f"gptq-{name}", status[name])
            for note in notes:
                print("   ", note)
    versions = args.out / "GPTQ_VERSIONS"
    old = versions.read_text().splitlines() if versions.exists() else []
    previous = {ln.split()[0]: ln for ln in old if ln.startswith("gptq-")}
    previous.update({f"gptq-{n}": f"gptq-{n} {s}" for n, s in status.items()})
    lines = [f"gptqmodel {gptqmodel.__version__}", f"transformers {transformers.__version__}",
             f"accelerate {accelerate.__version__}", f"torch {torch.__version__}"]
    versions.write_text("\n".join(lines + [previous[k] for k in sorted(previous)]) + "\n")


if __name__ == "__main__":
    main()
