"""Checkpoints as autoawq writes them: the awq-* fixtures under tests/fixtures/hub/.

    /work/pvenvs/awq/bin/python tools/gen_awq_fixtures.py [--out DIR]

The venv: ``python3 -m venv /work/pvenvs/awq``, ``pip install torch==2.13.0`` (the CPU wheel), then
``pip install --no-deps autoawq==0.2.9`` and ``pip install transformers==4.51.3 accelerate datasets zstandard``
(autoawq's other requirement, triton, is left out: it is for GPUs and autoawq runs without it). Everything
runs on the CPU, in under a minute.

One tiny Llama-like model with random float16 weights (hidden 64, two heads of 64, one key/value head,
intermediate 128, one layer, vocabulary 64) is written to a temporary folder, loaded with
``AutoAWQForCausalLM.from_pretrained``, quantized by ``quantize`` on synthetic calibration token ids and
written by ``save_quantized`` into ``awq-<variant>/`` (config.json and model.safetensors kept), once for each
entry of ``VARIANTS``. For every quantized Linear, ``awq-<variant>/own_dequant.npz`` holds autoawq's own
dequantized weight, as the raw bits of its float16 values (uint16, shape [out, in] as nn.Linear.weight), keyed
``<module name>.weight``:

* GEMM: ``awq.utils.packing_utils.dequantize_gemm`` applied to the saved qweight, qzeros and scales, transposed;
* GEMV, GEMV_fast, Marlin: autoawq has no dequantization of these outside its CUDA kernels, so the answer is
  the weight autoawq packs, ``AwqQuantizer.pseudo_quantize_tensor``'s output, recorded as ``_apply_quant`` hands
  it to the packing ``from_linear``.

The configurations autoawq refuses (``REFUSED``) are tried too, and must still be refused. Every saved layer is
decoded again here by ``DECODERS``, numpy written from the layouts that AWQ_README.md describes, and held to
own_dequant bit for bit, so the README's account is checked against autoawq each time the fixtures are made.
``AWQ_VERSIONS`` records the package versions and ``AWQ_README.md`` the layouts (generated here, with the
tensor shapes read back from the files). autoawq is not a dependency of fmtsim: nothing here is imported by the
package or the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261204
MODEL = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 1, "head_dim": 64, "vocab_size": 64, "max_position_embeddings": 64,
         "tie_word_embeddings": True}
CALIB = (8, 32)  # calibration: 8 random sequences of 32 token ids, in blocks of max_calib_seq_len=32
VARIANTS = {  # folder suffix -> autoawq quant_config (w_bit 4 throughout)
    "gemm": {"version": "GEMM", "zero_point": True, "q_group_size": 32},
    "gemm-g64-skip": {"version": "GEMM", "zero_point": True, "q_group_size": 64,
                      "modules_to_not_convert": ["o_proj"]},
    "gemv": {"version": "GEMV", "zero_point": True, "q_group_size": 32},
    "gemv-fast": {"version": "GEMV_fast", "zero_point": True, "q_group_size": 32},
    "marlin": {"version": "Marlin", "zero_point": False, "q_group_size": 32},
}
REFUSED = [  # quant_configs autoawq 0.2.9 refuses: each raises inside quantize, before anything is saved
    {"version": "GEMM", "zero_point": False, "q_group_size": 32},
    {"version": "GEMV", "zero_point": False, "q_group_size": 32},
    {"version": "GEMV_fast", "zero_point": False, "q_group_size": 32},
    {"version": "Marlin", "zero_point": True, "q_group_size": 32},
    # one group of the whole row: the WQLinear classes take -1 so, but the scale search's view(-1, -1) fails
    {"version": "GEMM", "zero_point": True, "q_group_size": -1},
    # a Linear that get_layers_for_scaling names (awq/models/llama.py) cannot be left out: KeyError
    {"version": "GEMM", "zero_point": True, "q_group_size": 64, "modules_to_not_convert": ["down_proj"]},
]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i of a GEMM word holds column 8c + AWQ_ORDER[i]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]  # column 8c + j lies in nibble AWQ_REVERSE_ORDER[j]


# ---- decoders: the layouts as AWQ_README.md states them, in numpy ---------------------------------------------
# Each takes one layer's stored tensors, {"qweight": ..., "scales": ..., ["qzeros": ...]}, and its group size, and
# gives (its stored 4-bit codes, its float16 weight), both [out, in] as nn.Linear.weight.

def _nibbles(a: np.ndarray) -> np.ndarray:
    """[..., C] int32/int16 words -> [..., C, 8 or 4] unsigned nibbles, least significant first."""
    u = a.view(np.uint32 if a.dtype == np.int32 else np.uint16).astype(np.int64)
    return (u[..., None] >> (4 * np.arange(2 * a.dtype.itemsize))) & 15


def _fp16(x: np.ndarray) -> np.ndarray:
    """Exact float64 values -> float16, rounded once to nearest even."""
    return x.astype(np.float16)


def decode_gemm(t: dict, group: int) -> tuple[np.ndarray, np.ndarray]:
    k = t["qweight"].shape[0]
    q = _nibbles(t["qweight"])[:, :, AWQ_REVERSE_ORDER].reshape(k, -1)  # [in, out]
    z = _nibbles(t["qzeros"])[:, :, AWQ_REVERSE_ORDER].reshape(k // group, -1)  # [in/G, out]
    g = np.arange(k) // group
    w = _fp16((q - z[g]) * t["scales"][g].astype(np.float64))
    return q.T, w.T


def decode_gemv(t: dict, group: int) -> tuple[np.ndarray, np.ndarray]:
    n, k = t["qweight"].shape[0], t["qweight"].shape[1] * 8
    q = _nibbles(t["qweight"]).reshape(n, k)  # [out, in], plain order
    ng = k // group
    z = _nibbles(t["qzeros"]).reshape(n, -1)[:, :ng]  # columns past in/G are padding
    s = t["scales"][:, :ng].astype(np.float64)
    g = np.arange(k) // group
    return q, _fp16((q - z[:, g]) * s[:, g])


def _gemv_fast_perm32() -> np.ndarray:
    """Position t of a reordered 32-block holds input column perm[t] (gemv_fast.py pack_intweight)."""
    p = np.arange(32).reshape(4, 4, 2).transpose(1, 0, 2).reshape(4, 4, 2).transpose(0, 2, 1)
    return p.reshape(32)


def decode_gemv_fast(t: dict, group: int, kernel: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """kernel=False: (q - zero) * scale, zero = round(-qzeros / scales); True: q * scales + qzeros, one rounding."""
    n4, k = t["qweight"].shape
    n = 4 * n4
    # int16 word [r4, 64b + j], nibble i  <-  reordered row 4*r4 + j // 16, column 64b + 4*(j % 16) + i
    p = _nibbles(t["qweight"]).reshape(n4, k // 64, 4, 64).transpose(0, 2, 1, 3).reshape(n, k)
    q = np.empty_like(p)
    q.reshape(n, k // 32, 32)[:, :, _gemv_fast_perm32()] = p.reshape(n, k // 32, 32)
    ng = k // group
    s = t["scales"][:ng].T.astype(np.float64)  # stored [padded groups, out]
    zs = t["qzeros"][:ng].T.astype(np.float64)  # float16 -(scale * zero), the "scaled zeros"
    g = np.arange(k) // group
    if kernel:
        return q, _fp16(q * s[:, g] + zs[:, g])  # one rounding, as awq_v2_ext's __hfma2
    zero = np.rint(-zs / np.where(s == 0, 1, s))
    return q, _fp16((q - zero[:, g]) * s[:, g])


def decode_marlin(t: dict, group: int) -> tuple[np.ndarray, np.ndarray]:
    from awq.modules.linear.marlin import _perm, _scale_perm, _scale_perm_single

    k, n = 16 * t["qweight"].shape[0], t["scales"].shape[1]
    res = _nibbles(t["qweight"]).reshape(k // 16, 16 * n)
    tiles = np.empty_like(res)
    tiles.reshape(-1, _perm.numel())[:, _perm.numpy()] = res.reshape(-1, _perm.numel())
    q = tiles.reshape(k // 16, n // 16, 16, 16).transpose(0, 2, 1, 3).reshape(k, n)  # [in, out]
    perm = np.asarray(_scale_perm if group != k else _scale_perm_single)
    s = np.empty_like(t["scales"])
    s.reshape(-1, perm.size)[:, perm] = t["scales"].reshape(-1, perm.size)
    g = np.arange(k) // group
    return q.T, _fp16((q - 8) * s[g].astype(np.float64)).T


DECODERS = {"gemm": decode_gemm, "gemv": decode_gemv, "gemv_fast": decode_gemv_fast, "marlin": decode_marlin}


# ---- generation ---------------------------------------------------------------------------------------------

def _bits(t) -> np.ndarray:  # noqa: ANN001 - a float16 torch tensor -> its raw bits, as numpy uint16
    import torch

    return t.contiguous().view(torch.uint16).numpy()


def _recording_quantizer(record: dict):  # noqa: ANN202 - an AwqQuantizer that keeps the weights it packs
    from awq.quantize.quantizer import AwqQuantizer
    from awq.utils.module import get_op_name

    class Recording(AwqQuantizer):
        def _apply_quant(self, module, named_linears):  # noqa: ANN001, ANN202
            prefix = get_op_name(self.model, module) + "."
            for name, linear in named_linears.items():  # the very call the parent makes, on the same weight
                record[prefix + name] = self.pseudo_quantize_tensor(linear.weight.data.half())[0].clone()
            return super()._apply_quant(module, named_linears)

    return Recording


def _quantize(src: str, calib: list, quant_config: dict, record: dict):  # noqa: ANN202
    from awq import AutoAWQForCausalLM

    model = AutoAWQForCausalLM.from_pretrained(src, device_map="cpu")
    model.quantize(None, quant_config={"w_bit": 4, **quant_config}, calib_data=calib, max_calib_seq_len=CALIB[1],
                   quantizer_cls=_recording_quantizer(record))
    return model


def _where(e: BaseException) -> str:
    """An exception as 'Type: message at awq/file.py:line (function): `source line`'."""
    frame = traceback.extract_tb(e.__traceback__)[-1]
    path = frame.filename[frame.filename.rindex("/awq/") + 1:] if "/awq/" in frame.filename else frame.filename
    msg = f": {e}" if str(e) else ""
    return f"{type(e).__name__}{msg} at {path}:{frame.lineno} ({frame.name}): `{frame.line}`"


def _make_variant(src: str, calib: list, qc: dict, dest: Path) -> dict:
    """Quantize, save into dest, write own_dequant.npz, check the decoders; what the README tells of it."""
    import torch
    from awq.utils.packing_utils import dequantize_gemm
    from safetensors.numpy import load_file

    record: dict = {}
    model = _quantize(src, calib, qc, record)
    shutil.rmtree(dest, ignore_errors=True)
    with tempfile.TemporaryDirectory() as saved:
        model.save_quantized(saved)
        written = sorted(p.name for p in Path(saved).iterdir())
        dest.mkdir()
        for keep in ("config.json", "model.safetensors"):
            shutil.copyfile(Path(saved) / keep, dest / keep)
    config = json.loads((dest / "config.json").read_text())["quantization_config"]
    tensors = load_file(dest / "model.safetensors")
    version, group = config["version"], config["group_size"]
    own, negative_zeros, kernel_off = {}, 0, 0
    for name, w in sorted(record.items()):
        t = {k: tensors[f"{name}.{k}"] for k in ("qweight", "qzeros", "scales") if f"{name}.{k}" in tensors}
        if version == "gemm":
            own_w = dequantize_gemm(*(torch.from_numpy(t[k]) for k in ("qweight", "qzeros", "scales")), 4, group).T
            if not torch.equal(own_w.view(torch.uint16), w.view(torch.uint16)):
                raise SystemExit(f"{dest.name} {name}: dequantize_gemm differs from pseudo_quantize_tensor")
        else:  # symmetric round(w / scale) = -0 packs as 0 (Marlin: nibble 8) and reads back +0: no -0 is stored
            negative_zeros += int(((w == 0) & torch.signbit(w)).sum())
            own_w = torch.where(w == 0, torch.zeros_like(w), w)
        own[name + ".weight"] = _bits(own_w)
        if not np.array_equal(DECODERS[version](t, group)[1].view(np.uint16), own[name + ".weight"]):
            raise SystemExit(f"{dest.name} {name}: the README's {version} layout does not give own_dequant")
        if version == "gemv_fast":  # its stored -(scale * zero) gives values of its own: count the differences
            kernel_off += int((decode_gemv_fast(t, group, kernel=True)[1].view(np.uint16)
                               != own[name + ".weight"]).sum())
    np.savez(dest / "own_dequant.npz", **own)
    print(dest.name, len(own), "layers")
    return {"written": written, "config": config, "layers": sorted(own), "weights": sum(v.size for v in own.values()),
            "negative_zeros": negative_zeros, "kernel_off": kernel_off,
            "digest": hashlib.sha256(b"".join(k.encode() + v.tobytes() for k, v in sorted(own.items()))).hexdigest(),
            "tensors": {k: (str(v.dtype), v.shape) for k, v in tensors.items()}}


def main() -> None:
    import awq
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "hub")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    calib = torch.randint(0, MODEL["vocab_size"], CALIB, generator=torch.Generator().manual_seed(SEED)).tolist()
    refused, made = [], {}
    with tempfile.TemporaryDirectory() as src:
        LlamaForCausalLM(LlamaConfig(**MODEL)).to(torch.float16).save_pretrained(src)
        for qc in REFUSED:
            try:
                _quantize(src, calib, qc, {})
            except Exception as e:  # noqa: BLE001 - the refusal is what is recorded
                refused.append((qc, _where(e)))
                print("refused", qc, refused[-1][1])
            else:
                raise SystemExit(f"autoawq now accepts {qc}: make it a variant")
        for variant, qc in VARIANTS.items():
            made[variant] = _make_variant(src, calib, qc, args.out / f"awq-{variant}")
    versions = {"autoawq": awq.__version__, "torch": torch.__version__, "transformers": transformers.__version__}
    (args.out / "AWQ_VERSIONS").write_text("".join(f"{k} {v}\n" for k, v in versions.items()))
    (args.out / "AWQ_README.md").write_text(_readme(made, refused, versions))
    total = sum(p.stat().st_size for d in args.out.glob("awq-*") for p in d.iterdir())
    print(f"{len(made)} variants, {total} bytes")


# ---- AWQ_README.md ------------------------------------------------------------------------------------------

LAYOUTS = """\
## What `save_quantized` writes

`BaseAWQForCausalLM.save_quantized` (awq/models/base.py) sets `model.config.quantization_config =
AwqConfig.to_transformers_dict()` (awq/models/_config.py), saves config.json and generation_config.json with
`save_pretrained` and an empty state dict, then the real state dict with huggingface_hub's
`save_torch_state_dict` (safetensors, shards of 5GB, the tied `lm_head.weight` dropped and named in the header's
`__metadata__` as `"lm_head.weight": "model.embed_tokens.weight"` beside `"format": "pt"`, in no fixed order from
run to run). autoawq 0.2.9 writes no quant_config.json. The keys of `quantization_config`, in the order written:

| key | value |
| --- | --- |
| `quant_method` | `"awq"` |
| `zero_point` | bool |
| `group_size` | int (`q_group_size`; -1, one group of a whole row to the WQLinear classes, fails the search) |
| `bits` | int (`w_bit`; 4: GEMM, GEMV and Marlin raise NotImplementedError else, GEMV_fast packs nibbles anyway) |
| `version` | lower case: `"gemm"`, `"gemv"`, `"gemv_fast"`, `"marlin"` (`AwqConfig.from_dict` lowers what was given) |
| `modules_to_not_convert` | null, or substrings: a matching Linear stays float16 (see below) |

Only the Linear layers inside the decoder layers are quantized (`get_named_linears` over
`get_model_layers`); embeddings, norms and lm_head stay float16, and so does a Linear whose name inside its
decoder layer contains one of `modules_to_not_convert` (`exclude_layers_to_not_quantize`, awq/utils/module.py):
a plain `nn.Linear` with `weight` (and `bias`). The search scales the norms and the preceding
Linear (`apply_scale`, awq/quantize/scale.py), so those float16 tensors differ from the original model's.

## Quantization: `AwqQuantizer.pseudo_quantize_tensor` (awq/quantize/quantizer.py)

All in float16 (`_apply_quant` calls `linear_layer.half()`), per group of `G` consecutive inputs of one output row:

* `zero_point=True` (asymmetric): `scale = (max - min).clamp(min=1e-5) / 15`,
  `zero = clamp(-round(min / scale), 0, 15)`, `q = clamp(round(w / scale) + zero, 0, 15)`,
  and the weight autoawq means is `(q - zero) * scale`. The zero point is an unsigned 4-bit integer.
* `zero_point=False` (symmetric): `scale = max(|w|).clamp(min=1e-5) / 7`, `q = clamp(round(w / scale), -8, 7)`,
  weight `q * scale`; no zeros at all. Only Marlin packs this: GEMM, GEMV and GEMV_fast assert
  `zeros is not None` in `from_linear`, and Marlin asserts `zeros is None` (see "Refused").

The packers (`from_linear`) are handed that fake-quantized weight and recompute the integers as
`round((w + zero * scale) / scale)` (Marlin: `clamp(round(w / scale) + 8, 0, 15)`).

Below `K` = in_features, `N` = out_features, `ng = K / G`, and "nibble i" is bits `4i .. 4i+3` of a word,
least significant first. Words are stored as signed int32 (int16 for GEMV_fast): read them as unsigned.

## GEMM (`WQLinear_GEMM.from_linear`, awq/modules/linear/gemm.py)

| tensor | dtype | shape |
| --- | --- | --- |
| `qweight` | int32 | `[K, N/8]` |
| `qzeros` | int32 | `[ng, N/8]` |
| `scales` | float16 | `[ng, N]` |
| `bias` (if any) | float16 | `[N]` |

Transposed against nn.Linear: rows are inputs. Packed along the output axis, 8 outputs a word, nibble `i` of
word `c` holding output column `8c + AWQ_ORDER[i]`, `AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]`; equally, column
`8c + j` lies in nibble `AWQ_REVERSE_ORDER[j]`, `[0, 4, 1, 5, 2, 6, 3, 7]` (awq/utils/packing_utils.py). qzeros is
packed the same way, one row per group. Input `k` uses group `k // G`.

Dequantization, `dequantize_gemm` (awq/utils/packing_utils.py, the CPU path of `WQLinearMMFunction.forward`
when neither awq_ext nor triton is present): `unpack_awq` shifts each int32 right by 0, 4, ..., 28 and casts to
int8, `reverse_awq_order` undoes AWQ_ORDER, both are masked with `& 15`, scales and zeros are
`repeat_interleave`d `G` times along the input axis, and `(iweight - izeros) * scales`: an int8 difference
(exact, -15..15) times the float16 scale, one float16 rounding, result `[K, N]` float16. own_dequant holds its
transpose.

## GEMV (`WQLinear_GEMV.from_linear`, awq/modules/linear/gemv.py)

| tensor | dtype | shape |
| --- | --- | --- |
| `qweight` | int32 | `[N, K/8]` |
| `qzeros` | int32 | `[N, ZW]` |
| `scales` | float16 | `[N, 8 ZW]` |

Rows are outputs, as nn.Linear. Packed along the input axis in plain order: nibble `i` of `qweight[n, c]` is
input `8c + i`. `ZW = calculate_zeros_width(K, G)` = `ceil(ng / 8)` rounded up to a multiple of 1 (G >= 128),
2 (G = 64) or 4 (G = 32); other group sizes raise NotImplementedError. Nibble `i` of `qzeros[n, c]` is the zero
of group `8c + i`, and `scales[n, g]` its scale; zero nibbles and scale columns from `ng` on are padding (zeros).
Dequantization `(q - zero) * scale`; autoawq has none outside awq_ext's CUDA GEMV kernels (AutoAWQ_kernels,
awq_ext/quantization/gemv_cuda.cu: `scale * (q - zero)` in float32, exact, and the same value once rounded to
float16), so own_dequant is the packed weight.

## GEMV_fast (`WQLinear_GEMVFast.from_linear`, awq/modules/linear/gemv_fast.py)

| tensor | dtype | shape |
| --- | --- | --- |
| `qweight` | int16 | `[N/4, K]` |
| `scales` | float16 | `[8 ZW, N]` |
| `qzeros` | float16 | `[8 ZW, N]` |

`ZW` as for GEMV; rows `ng` and on are padding (zeros). scales is transposed (`scales[g, n]`), and qzeros is
not an integer: it is the float16 "scaled zero" `-(scale * zero)` (the product taken in float32, then rounded to
float16). `pack_intweight(intweight [N, K], interleave=4, kstride=64)`: within each block of 32 inputs,
position `t` takes input `perm[t]`, `perm = arange(32).reshape(4, 4, 2).transpose(1, 0, 2).reshape(4, 4, 2)
.transpose(0, 2, 1).ravel()` = `[0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27, 4, 12, ...]`; then 4
output rows are interleaved per 64 inputs: nibble `i` of `qweight[r, 64b + j]` is reordered row `4r + j // 16`,
position `64b + 4 (j % 16) + i`. K must be a multiple of 64 and N of 4. Dequantization: none in autoawq's
Python; awq_v2_ext (AutoAWQ_kernels, awq_ext/quantization_new/gemv/gemv_cuda.cu) computes
`__hfma2(q, scale, scaled_zero)`, `q * scale + qzeros` with one float16 rounding, which is not always
`(q - zero) * scale` (see below). own_dequant is autoawq's packed weight, `(q - zero) * scale`.

## Marlin (`WQLinear_Marlin.from_linear`, awq/modules/linear/marlin.py)

| tensor | dtype | shape |
| --- | --- | --- |
| `qweight` | int32 | `[K/16, 2N]` |
| `scales` | float16 | `[ng, N]` (permuted) |

Symmetric only (`zero_point: false`), no qzeros: the nibble is `q + 8`, unsigned 0..15, and the weight is
`(nibble - 8) * scale`. The `[K, N]` integer matrix is cut into 16 x 16 tiles, each row of tiles laid out
tile after tile (`reshape(K/16, 16, N/16, 16).permute(0, 2, 1, 3).reshape(K/16, 16 N)`), every 1024 consecutive
values permuted by `_perm` from `_get_perms()` (new position `j` takes old `_perm[j]`, `_perm` already folding
in the `[0, 2, 4, 6, 1, 3, 5, 7]` interleave), then 8 consecutive values packed LSB first into each int32. The
scales `[ng, N]`, read flat, are permuted in runs of 64 by `_scale_perm` (`_scale_perm_single`, runs of 32, when
G = K). Dequantization: none outside marlin_cuda, so own_dequant is the packed weight.

## Exllama, ExllamaV2, IPEX

Not formats on disk: `from_quantized(use_exllama=..., use_exllama_v2=..., use_ipex=...)` reads a GEMM
checkpoint and repacks it at load (`unpack_reorder_pack`: AWQ order undone, weights packed along the input
axis, zeros minus 1). On a machine with no CUDA, XPU or MPS device, `from_quantized` forces `use_ipex` and raises
ImportError without intel_extension_for_pytorch, so autoawq cannot load these fixtures back on this CPU.
"""


def _readme(made: dict, refused: list, versions: dict) -> str:
    lines = ["# AWQ checkpoints as autoawq writes them", "",
             "Made on the CPU by `tools/gen_awq_fixtures.py` (its docstring says how to run it) with "
             + ", ".join(f"{k} {v}" for k, v in versions.items()) + " (AWQ_VERSIONS). One Llama-like model, "
             f"random float16 weights, `{json.dumps(MODEL)}`, quantized with {CALIB[0]} random sequences of "
             f"{CALIB[1]} token ids as calibration. Every source location cited is autoawq {versions['autoawq']}'s.",
             "", "Each folder holds `config.json` and `model.safetensors` as `save_quantized` wrote them (it also "
             "wrote " + ", ".join(sorted({n for m in made.values() for n in m["written"]}
                                         - {"config.json", "model.safetensors"}))
             + ", not kept), and `own_dequant.npz`: for each quantized Linear, `<module name>.weight`, the raw bits "
             "(uint16) of autoawq's float16 weight, shape [out, in] as nn.Linear.weight. For GEMM it is "
             "`dequantize_gemm` of the saved tensors; for the others, which autoawq dequantizes only in CUDA "
             "kernels, it is the weight `pseudo_quantize_tensor` gave and `from_linear` packed (for GEMM the two "
             "agree bit for bit, checked). The generator decodes every layer again from the layouts below and "
             "checks it against own_dequant.", "", "## Variants", "",
             "| folder | quantization_config | quantized layers | kept float16 |", "| --- | --- | --- | --- |"]
    for variant, m in made.items():
        plain = sorted(k[:-len(".weight")] for k, (dt, _) in m["tensors"].items() if k.endswith("proj.weight"))
        lines.append(f"| `awq-{variant}` | `{json.dumps(m['config'], sort_keys=True)}` | {len(m['layers'])} | "
                     + (", ".join(f"`{p}`" for p in plain) or "-") + " |")
    lines += ["", "## Refused (tried, and must still fail)", "",
              "The zero-point ones raise in `_apply_quant`'s call of `from_linear`, after the whole scale and clip "
              "search, and group size -1 at the search's start. The `modules_to_not_convert` one raises in the "
              "search, where `LlamaAWQForCausalLM.get_layers_for_scaling` looks up the input features of the Linear "
              "left out: only "
              "a Linear in no scaling group can be left out, such as `o_proj` here (its group, after `v_proj`, is "
              "formed only when the two have one shape). Nothing is saved. None of them needs a GPU to "
              "fail, nor does anything above need one: every variant autoawq can write is here. A GPU (with "
              "autoawq-kernels) is needed only to run the GEMV, GEMV_fast and Marlin layers, and their kernels' "
              "dequantization, which this machine cannot; GEMM runs on the CPU through `dequantize_gemm`.", ""]
    lines += [f"* `{json.dumps(qc, sort_keys=True)}`: {where}" for qc, where in refused]
    lines += ["", "## Differences worth knowing", ""]
    for digest in dict.fromkeys(m["digest"] for m in made.values()):
        same = [f"`awq-{v}`" for v, m in made.items() if m["digest"] == digest]
        if len(same) > 1:
            lines.append(f"* {', '.join(same)} have one own_dequant, bit for bit: the same search found the same "
                         "weights, packed differently.")
    for variant, m in made.items():
        if m["kernel_off"]:
            lines.append(f"* `awq-{variant}`: {m['kernel_off']} of its {m['weights']} weights differ between "
                         "own_dequant, `(q - zero) * scale`, and the kernel's arithmetic on the stored tensors, "
                         "`q * scales + qzeros` rounded once to float16, because qzeros holds `-(scale * zero)` "
                         "already rounded to float16. The zero is not stored; `round(-qzeros / scales)` recovers it.")
        if m["negative_zeros"]:
            lines.append(f"* `awq-{variant}`: {m['negative_zeros']} of its {m['weights']} weights are -0.0 in "
                         "`pseudo_quantize_tensor`'s output (symmetric `round(w / scale)` of a small negative "
                         "weight) but pack as nibble 8 and read back +0.0; own_dequant has +0.0 there.")
    lines += ["", "## Tensors in the fixtures", "", "| folder | tensor | dtype | shape |", "| --- | --- | --- | --- |"]
    for variant, m in made.items():
        for k, (dt, shape) in sorted(m["tensors"].items()):
            if ".layers.0.self_attn.o_proj." in k or ".layers.0.mlp.down_proj." in k:
                lines.append(f"| `awq-{variant}` | `{k}` | {dt} | {list(shape)} |")
    return "\n".join(lines) + "\n\n" + LAYOUTS


if __name__ == "__main__":
    main()
