"""GGUF MXFP4 <-> safetensors MXFP4 in gpt-oss's layout, losslessly: the same E2M1 codes and E8M0
scale bytes, moved between the two layouts.

Both store, per 32 elements of a row, one E8M0 byte ``e`` and 32 E2M1 codes, with the same meaning
(ggml doubles the E2M1 values and halves the scale: ``kv[q] * 2^(e-128) = e2m1[q] * 2^(e-127)``).
They differ in where the codes sit:

- ggml's ``block_mxfp4`` (17 bytes): ``e``, then 16 bytes whose low nibbles are elements 0-15 and
  high nibbles elements 16-31;
- gpt-oss (``gpt_oss/torch/weights.py``; the Hugging Face release): ``L_blocks`` U8 [..., G, 16]
  with byte i holding elements 2i (low nibble) and 2i+1 (high), and ``L_scales`` U8 [..., G].

GGUF -> safetensors writes each MXFP4 tensor ``N`` as ``N_blocks`` / ``N_scales`` (read back by the
``gpt-oss-mxfp4`` record: ``fmtsim checkpoint dequantize`` gives ``N``), the other quantized
tensors as ggml's float32 values, and copies the plain ones; a ``config.json`` with
``quantization_config.quant_method = "mxfp4"`` marks the folder as gpt-oss's. Safetensors -> GGUF
writes every ``L_blocks`` / ``L_scales`` pair as one GGUF MXFP4 tensor ``L`` and copies F32, F16
and BF16 tensors (and the integer types GGUF has); anything else is refused by name. Tensor names
are kept as they are (llama.cpp's converter renames and splits gpt-oss's tensors, so the output is
for reading and comparing tensors, not for llama.cpp to run). Each written file is read back and
its codes compared with the input's before it is renamed into place.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import UnsafeOutputError, check_replaceable
from . import ggml
from . import gguf as G
from .files import CheckpointError, Entry, ShardWriter, header_bytes

__all__ = ["ggml_mxfp4_to_gpt_oss", "gpt_oss_to_ggml_mxfp4", "gguf_to_safetensors_mxfp4",
           "safetensors_to_gguf_mxfp4", "MXFP4ConversionSummary"]

_MX = ggml.BY_NAME["MXFP4"]


def ggml_mxfp4_to_gpt_oss(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, 17) ggml blocks -> (n, 16) gpt-oss code bytes and (n,) scale bytes."""
    b = np.asarray(blocks, dtype=np.uint8).reshape(-1, _MX.nbytes)
    qs = b[:, 1:]
    codes = np.concatenate([qs & 0xF, qs >> 4], axis=1)  # element order 0..31
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8), b[:, 0].copy()


def gpt_oss_to_ggml_mxfp4(code_bytes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """(n, 16) gpt-oss code bytes and (n,) scale bytes -> (n, 17) ggml blocks."""
    cb = np.asarray(code_bytes, dtype=np.uint8).reshape(-1, 16)
    codes = np.stack([cb & 0xF, cb >> 4], axis=2).reshape(len(cb), 32)
    qs = (codes[:, :16] | (codes[:, 16:] << 4)).astype(np.uint8)
    return np.concatenate([np.asarray(scales, dtype=np.uint8).reshape(-1, 1), qs], axis=1)


@dataclass
class MXFP4ConversionSummary:
    source: Path
    output: Path
    mxfp4: int               # tensors moved between the layouts, code for code
    dequantized: int = 0     # other quantized GGUF tensors, written as ggml's float32 values
    copied: int = 0
    notes: list[str] = field(default_factory=list)


def gguf_to_safetensors_mxfp4(src: str | Path, out: str | Path) -> MXFP4ConversionSummary:
    """A GGUF file -> a folder ``out`` with model.safetensors (gpt-oss MXFP4 layout) and config.json."""
    from .files import Source, check_output

    g = G.read_gguf(src)
    mx = [t for t in g.tensors if t.type is _MX]
    if not mx:
        have = ", ".join(sorted({t.type.name for t in g.tensors}))
        raise CheckpointError(f"{g.path}: no MXFP4 tensor to convert (its types: {have})")
    undecodable = [t.name for t in g.tensors if t.quantized and t.type.decode is None]
    if undecodable:
        raise CheckpointError(f"{g.path}: tensor {undecodable[0]!r} is {g.tensor(undecodable[0]).type.name}, which "
                              "ggml has no dequantizer for; nothing written")
    if Path(out).exists() and not Path(out).is_dir():
        raise CheckpointError(f"output {out} exists and is not a directory (the output is a folder: "
                              "model.safetensors and config.json)")
    out_dir = check_output(Source(g.path, [g.path], None, True), out)  # a folder, as for a folder source
    entries, begin, plan = [], 0, []
    for t in g.tensors:
        if t.type is _MX:
            groups = t.shape[:-1] + (t.shape[-1] // 32,)
            for suffix, shape in (("_blocks", groups + (16,)), ("_scales", groups)):
                n = int(np.prod(shape))
                entries.append(Entry(t.name + suffix, "U8", shape, begin, begin + n))
                begin += n
            plan.append((t, "mxfp4"))
        else:
            tag, dt = ("F32", np.dtype("<f4")) if t.quantized else G._safetensors_tag(t, "float32")
            n = t.elements * dt.itemsize
            entries.append(Entry(t.name, tag, t.shape, begin, begin + n))
            begin += n
            plan.append((t, "values"))
    names = {e.name for e in entries}
    clash = [t.name for t in g.tensors if t.type is not _MX and (t.name + "_blocks" in names)]
    if clash:
        raise CheckpointError(f"{g.path}: tensor {clash[0]!r} would collide with an MXFP4 tensor's _blocks name")
    meta = {"format": "pt", "fmtsim.source": f"gguf v{g.version} {g.path.name}",
            "fmtsim.layout": "gpt-oss MXFP4 (N_blocks [..., G, 16], N_scales [..., G]); other quantized tensors "
                             "as ggml's float32 values"}
    os.makedirs(out_dir, exist_ok=True)
    final = out_dir / "model.safetensors"
    with open(g.path, "rb") as fh, ShardWriter(final) as w:
        w.write(header_bytes(entries, {}, meta))
        for t, how in plan:
            if how == "mxfp4":
                codes, scales = ggml_mxfp4_to_gpt_oss(G.read_raw(g, t))
                w.write(codes.tobytes())
                w.write(scales.tobytes())
            else:
                for chunk in G.iter_values(fh, t):
                    w.write(np.ascontiguousarray(chunk).tobytes())
        tmp = w.finish()
        _verify_safetensors(tmp, g, mx)
        w.commit()
    config = out_dir / "config.json"
    _write_json(config, {"quantization_config": {"quant_method": "mxfp4"},
                         "fmtsim": {"converted_from": g.path.name,
                                    "architecture": g.metadata.get("general.architecture")}})
    s = MXFP4ConversionSummary(g.path, out_dir, len(mx), sum(t.quantized and t.type is not _MX for t in g.tensors),
                               sum(not t.quantized for t in g.tensors), list(g.notes))
    s.notes.append("tensor names are GGUF's; llama.cpp's converter renames and splits gpt-oss's tensors, so this "
                   "folder is for reading and comparing the MXFP4 codes, not a Hugging Face model")
    return s


def _verify_safetensors(path: Path, g: G.GGUFFile, mx: list[G.GGUFTensor]) -> None:
    from .files import read_header, read_tensor

    h = read_header(path)
    with open(path, "rb") as fh:
        for t in mx:
            codes = read_tensor(fh, h, h.entries[t.name + "_blocks"]).reshape(-1, 16)
            scales = read_tensor(fh, h, h.entries[t.name + "_scales"]).reshape(-1)
            if not np.array_equal(gpt_oss_to_ggml_mxfp4(codes, scales), G.read_raw(g, t)):
                raise CheckpointError(f"{path}: read back, {t.name}'s codes differ from the input's; nothing "
                                      "was left under the final name")


def _write_json(path: Path, obj: Any) -> None:
    with ShardWriter(path) as w:
        w.write((json.dumps(obj, indent=2) + "\n").encode())
        w.commit()


_GGUF_PLAIN = {"F32": ggml.BY_NAME["F32"], "F16": ggml.BY_NAME["F16"], "BF16": ggml.BY_NAME["BF16"],
               "I8": ggml.BY_NAME["I8"], "I16": ggml.BY_NAME["I16"], "I32": ggml.BY_NAME["I32"],
               "I64": ggml.BY_NAME["I64"], "F64": ggml.BY_NAME["F64"]}


def safetensors_to_gguf_mxfp4(src: str | Path, out: str | Path, architecture: str | None = None
                              ) -> MXFP4ConversionSummary:
    """A gpt-oss MXFP4 safetensors checkpoint (file or folder) -> one GGUF file, MXFP4 tensors as ggml's."""
    try:
        import gguf as gguf_py
    except ImportError:
        raise CheckpointError("writing GGUF needs gguf-py: pip install 'fmtsim[checkpoint]'") from None
    from .files import check_output, find_source, read_headers, read_tensor
    from .producers import read_configs

    source = find_source(src)
    headers, where = read_headers(source)
    entries = {n: headers[where[n]].entries[n] for n in where}
    pairs = {}
    for n in entries:
        for bsuf, ssuf in (("_blocks", "_scales"), (".blocks", ".scales")):
            if n.endswith(bsuf) and n[: -len(bsuf)] + ssuf in entries:
                pairs[n[: -len(bsuf)]] = (n, n[: -len(bsuf)] + ssuf)
    if not pairs:
        raise CheckpointError(f"{source.path}: no MXFP4 tensor pair (L_blocks U8 [..., G, 16] with L_scales U8 "
                              "[..., G], gpt-oss's layout) to convert")
    used = {x for p in pairs.values() for x in p}
    for base, (bn, sn) in pairs.items():
        b, s = entries[bn], entries[sn]
        if b.dtype != "U8" or s.dtype != "U8" or b.shape[-1:] != (16,) or b.shape[:-1] != s.shape:
            raise CheckpointError(f"{bn} {b.dtype}{list(b.shape)} / {sn} {s.dtype}{list(s.shape)}: not gpt-oss's "
                                  "MXFP4 layout (U8 [..., G, 16] codes with U8 [..., G] scales)")
        if base in entries:
            raise CheckpointError(f"{base!r} exists beside {bn!r}: the MXFP4 tensor's GGUF name would collide")
    others = [n for n in sorted(entries) if n not in used]
    bad = [n for n in others if entries[n].dtype not in _GGUF_PLAIN]
    if bad:
        raise CheckpointError(f"{bad[0]} is {entries[bad[0]].dtype}, which GGUF stores in no plain type (F32, F16, "
                              "BF16, I8-I64, F64); nothing written")
    final = check_output(source, out)
    if source.is_dir:  # a folder source: the GGUF goes to a file, never into a folder named OUT
        if final.exists() and final.is_dir():
            final = final / (source.path.name + ".gguf")
    if final.exists() and not final.is_file():
        raise CheckpointError(f"output {final} exists and is not a regular file")
    configs = read_configs(source.path if source.is_dir else None)
    arch = architecture or str(configs.get("config.json", {}).get("model_type") or "unknown")
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    try:
        w = gguf_py.GGUFWriter(tmp, arch)
        w.add_string("general.name", f"{source.path.name} (fmtsim MXFP4 layout conversion)")
        order: list[tuple[str, str]] = []
        for base in sorted(pairs):
            bn, _ = pairs[base]
            byte_shape = entries[bn].shape[:-2] + (entries[bn].shape[-2] * _MX.nbytes,)  # gguf-py takes bytes
            nbytes = int(np.prod(byte_shape))
            w.add_tensor_info(base, byte_shape, np.dtype(np.uint8), nbytes,
                              raw_dtype=gguf_py.GGMLQuantizationType.MXFP4)
            order.append((base, "mxfp4"))
        for n in others:
            e = entries[n]
            t = _GGUF_PLAIN[e.dtype]
            w.add_tensor_info(n, e.shape, ggml.PLAIN_DTYPES[t.name], e.nbytes,
                              raw_dtype=gguf_py.GGMLQuantizationType[t.name])
            order.append((n, "plain"))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        handles: dict[Path, Any] = {}
        try:
            for name, how in order:
                if how == "mxfp4":
                    bn, sn = pairs[name]
                    hb, hs = headers[where[bn]], headers[where[sn]]
                    fb = handles.setdefault(hb.path, open(hb.path, "rb"))
                    fs = handles.setdefault(hs.path, open(hs.path, "rb"))
                    blocks = gpt_oss_to_ggml_mxfp4(read_tensor(fb, hb, hb.entries[bn]),
                                                   read_tensor(fs, hs, hs.entries[sn]))
                    w.write_tensor_data(blocks.reshape(-1))
                else:
                    h = headers[where[name]]
                    f = handles.setdefault(h.path, open(h.path, "rb"))
                    w.write_tensor_data(np.ascontiguousarray(read_tensor(f, h, h.entries[name])))
        finally:
            for f in handles.values():
                f.close()
        w.close()
        g = G.read_gguf(tmp)
        _verify_gguf(g, pairs, headers, where)
        try:
            check_replaceable(final)  # never over a symlink, a device or anything not a regular file
        except UnsafeOutputError as err:
            raise CheckpointError(str(err)) from None
        os.replace(tmp, final)
    except OSError as e:
        raise CheckpointError(f"{final}: cannot write: {e.strerror or e}; nothing was left under that name") from None
    finally:
        tmp.unlink(missing_ok=True)
    return MXFP4ConversionSummary(source.path, final, len(pairs), 0, len(others),
                                  ["tensor names are kept as they are (llama.cpp's own converter renames and splits "
                                   "gpt-oss's tensors): the file is for reading and comparing, not for llama.cpp to "
                                   "run"])


def _verify_gguf(g: G.GGUFFile, pairs: dict[str, tuple[str, str]], headers: Any, where: dict[str, Path]) -> None:
    from .files import read_tensor

    for base, (bn, sn) in pairs.items():
        hb, hs = headers[where[bn]], headers[where[sn]]
        with open(hb.path, "rb") as fb, open(hs.path, "rb") as fs:
            codes, scales = read_tensor(fb, hb, hb.entries[bn]), read_tensor(fs, hs, hs.entries[sn])
        back_codes, back_scales = ggml_mxfp4_to_gpt_oss(G.read_raw(g, g.tensor(base)))
        if not (np.array_equal(back_codes, codes.reshape(-1, 16)) and np.array_equal(back_scales, scales.reshape(-1))):
            raise CheckpointError(f"{g.path}: read back, {base}'s codes differ from the input's; nothing was left "
                                  "under the final name")
