"""GGUF files (llama.cpp's model format): reading, validating, inspecting and dequantizing them.

The container is parsed here, by the GGUF specification (ggml's ``docs/gguf.md``: versions 2 and
3, little-endian; a key-value section, tensor infos, then the tensor data aligned to
``general.alignment``, 32 by default), and every claim checked before a byte of data is read:
lengths within the file, tensor names unique, sizes equal to what the type and shape need,
offsets aligned and inside the data section, no two tensors overlapping. When gguf-py (the
``gguf`` package, the ecosystem's own parser) is installed, its reading of the same file is
compared with this one (names, types, shapes, offsets); a type gguf-py does not know yet is said,
not hidden. Parsing here rather than through gguf-py keeps files readable whose types are newer
than the installed gguf-py (gguf 0.19.0 has no Q2_0) and lets errors name the byte offset.

Values come from :mod:`.ggml` (ggml's reference dequantizers, value for value). Tensor data are
read in bounded chunks of blocks, never memory-mapped whole.
"""

from __future__ import annotations

import os
import struct
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from . import ggml
from .files import CheckpointError, ShardWriter

__all__ = ["GGUFTensor", "GGUFFile", "read_gguf", "is_gguf", "crosscheck_gguf", "iter_values", "read_values",
           "load_gguf", "type_mix", "file_type_name", "GGUFInspection", "inspect_gguf", "dequantize_gguf",
           "GGUF_MAGIC", "PRESETS", "explain_gguf", "diff_gguf", "read_raw"]

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
CHUNK_BYTES = 1 << 20

# GGUF metadata value types (gguf.md): code -> (name, struct format or None for string/array)
_VALUE_TYPES: dict[int, tuple[str, str | None]] = {
    0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"), 4: ("uint32", "<I"),
    5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<?"), 8: ("string", None), 9: ("array", None),
    10: ("uint64", "<Q"), 11: ("int64", "<q"), 12: ("float64", "<d"),
}
_NUMPY_OF = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8",
             12: "<f8"}

# llama.cpp's llama_ftype (general.file_type): the presets llama-quantize writes.
PRESETS: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
}
# The ggml type a preset's bulk of weights is in (llama-quantize's default type per ftype); the
# _S/_M/_L variants differ in which tensors (attn_v, ffn_down, output) get a larger type.
PRESET_BASE: dict[str, str] = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q8_0": "Q8_0", "Q5_0": "Q5_0",
    "Q5_1": "Q5_1", "Q2_K": "Q2_K", "Q2_K_S": "Q2_K", "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K", "Q6_K": "Q6_K",
    "IQ2_XXS": "IQ2_XXS", "IQ2_XS": "IQ2_XS", "IQ2_S": "IQ2_XS", "IQ2_M": "IQ2_S", "IQ3_XS": "IQ3_S",
    "IQ3_XXS": "IQ3_XXS", "IQ3_S": "IQ3_S", "IQ3_M": "IQ3_S", "IQ1_S": "IQ1_S", "IQ1_M": "IQ1_M",
    "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS", "TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0", "MXFP4_MOE": "MXFP4",
    "NVFP4": "NVFP4", "Q1_0": "Q1_0",
}


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    type: ggml.GGMLType
    shape: tuple[int, ...]  # numpy order: the last axis is ggml's ne[0], the row
    offset: int             # absolute byte offset in the file
    nbytes: int

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def quantized(self) -> bool:
        return self.type.name not in ggml.PLAIN_DTYPES

    @property
    def dtype(self) -> str:
        """The ggml type's name (F16, Q4_K, ...), as a safetensors entry's dtype tag reads."""
        return self.type.name


@dataclass
class GGUFFile:
    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[GGUFTensor]
    alignment: int
    data_start: int
    file_size: int
    notes: list[str] = field(default_factory=list)

    def tensor(self, name: str) -> GGUFTensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise CheckpointError(f"{self.path}: no tensor named {name!r}")


class _Cursor:
    """Bounds-checked little-endian reads from the file's head; errors name the byte offset."""

    def __init__(self, fh: BinaryIO, path: Path, size: int) -> None:
        self.fh, self.path, self.size, self.pos = fh, path, size, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            raise CheckpointError(f"{self.path}: byte {self.pos}: {what} needs {n} bytes, the file ends at "
                                  f"{self.size} (truncated or not a GGUF file)")
        raw = self.fh.read(n)
        if len(raw) != n:
            raise CheckpointError(f"{self.path}: byte {self.pos}: short read of {what}")
        self.pos += n
        return raw

    def unpack(self, fmt: str, what: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        at = self.pos
        n = self.unpack("<Q", f"the length of {what}")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(f"{self.path}: byte {at}: {what} is not UTF-8") from None

    def value(self, vtype: int, key: str) -> Any:
        if vtype not in _VALUE_TYPES:
            raise CheckpointError(f"{self.path}: byte {self.pos}: metadata {key!r} has value type {vtype}, "
                                  f"not one GGUF defines (0-12)")
        name, fmt = _VALUE_TYPES[vtype]
        if fmt is not None:
            return self.unpack(fmt, f"metadata {key!r} ({name})")
        if name == "string":
            return self.string(f"metadata {key!r}")
        etype = self.unpack("<I", f"the element type of metadata {key!r}")
        count = self.unpack("<Q", f"the length of metadata {key!r}")
        if etype in _NUMPY_OF:
            dt = np.dtype(_NUMPY_OF[etype])
            return np.frombuffer(self.take(count * dt.itemsize, f"metadata {key!r}"), dtype=dt).tolist()
        if etype not in _VALUE_TYPES:
            raise CheckpointError(f"{self.path}: byte {self.pos}: metadata {key!r} is an array of type {etype}, "
                                  "not one GGUF defines")
        if count > self.size - self.pos:  # each element takes at least one byte
            raise CheckpointError(f"{self.path}: byte {self.pos}: metadata {key!r} claims {count} elements, more "
                                  "than the file's remaining bytes")
        return [self.value(etype, f"{key}[{i}]") for i in range(count)]


def is_gguf(path: str | Path) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as fh:
        return fh.read(4) == GGUF_MAGIC


def read_gguf(path: str | Path, crosscheck: bool = True) -> GGUFFile:
    """Parse and validate a GGUF file's header and tensor infos; CheckpointError says what is wrong where."""
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{p}: no such file" if not p.exists() else f"{p}: not a regular file")
    size = p.stat().st_size
    with open(p, "rb") as fh:
        c = _Cursor(fh, p, size)
        magic = c.take(4, "the magic")
        if magic != GGUF_MAGIC:
            raise CheckpointError(f"{p}: not a GGUF file (it starts with {magic!r}, not b'GGUF')")
        version = c.unpack("<I", "the version")
        if version in (2 << 24, 3 << 24):
            raise CheckpointError(f"{p}: a big-endian GGUF file (version {version >> 24}); fmtsim reads "
                                  "little-endian GGUF")
        if version == 1:
            raise CheckpointError(f"{p}: GGUF version 1 (32-bit counts, before August 2023): convert it with "
                                  "a current llama.cpp; fmtsim reads versions 2 and 3")
        if version not in (2, 3):
            raise CheckpointError(f"{p}: GGUF version {version}; fmtsim reads versions 2 and 3")
        n_tensors = c.unpack("<Q", "the tensor count")
        n_kv = c.unpack("<Q", "the metadata count")
        if n_tensors > size // 24 or n_kv > size // 12:  # each takes at least that many bytes
            raise CheckpointError(f"{p}: byte 8: claims {n_tensors} tensors and {n_kv} metadata entries, more "
                                  f"than {size} bytes can hold")
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            at = c.pos
            key = c.string("a metadata key")
            vtype = c.unpack("<I", f"the value type of {key!r}")
            if key in metadata:
                raise CheckpointError(f"{p}: byte {at}: metadata key {key!r} appears twice")
            metadata[key] = c.value(vtype, key)
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment % 8:
            raise CheckpointError(f"{p}: general.alignment is {alignment!r}; GGUF needs a positive multiple of 8")
        infos = []
        names: set[str] = set()
        for i in range(n_tensors):
            at = c.pos
            name = c.string(f"the name of tensor {i}")
            if name in names:
                raise CheckpointError(f"{p}: byte {at}: tensor name {name!r} appears twice")
            names.add(name)
            n_dims = c.unpack("<I", f"the dimension count of {name!r}")
            if not 1 <= n_dims <= MAX_DIMS:
                raise CheckpointError(f"{p}: tensor {name!r} has {n_dims} dimensions; ggml allows 1 to {MAX_DIMS}")
            ne = [c.unpack("<Q", f"dimension {d} of {name!r}") for d in range(n_dims)]
            code = c.unpack("<I", f"the type of {name!r}")
            offset = c.unpack("<Q", f"the data offset of {name!r}")
            infos.append((name, ne, code, offset))
        data_start = c.pos + (-c.pos % alignment)
    tensors = []
    for name, ne, code, offset in infos:
        try:
            t = ggml.get_type(code)
        except ValueError as e:
            raise CheckpointError(f"{p}: tensor {name!r}: {e}") from None
        if any(n == 0 for n in ne) or int(np.prod(ne, dtype=object)) > size * 8:
            raise CheckpointError(f"{p}: tensor {name!r} has shape ne={ne}, which its bytes cannot hold")
        try:
            nbytes = ggml.row_bytes(t, ne[0]) * int(np.prod(ne[1:], dtype=object))
        except ValueError as e:
            raise CheckpointError(f"{p}: tensor {name!r}: {e}") from None
        if offset % alignment:
            raise CheckpointError(f"{p}: tensor {name!r} starts at data offset {offset}, not a multiple of the "
                                  f"alignment {alignment}")
        start = data_start + offset
        if start + nbytes > size:
            raise CheckpointError(f"{p}: tensor {name!r} ({t.name}, ne={ne}) needs bytes {start}..{start + nbytes}, "
                                  f"the file ends at {size} (truncated?)")
        tensors.append(GGUFTensor(name, t, tuple(reversed(ne)), start, nbytes))
    ordered = sorted(tensors, key=lambda t: t.offset)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.offset + a.nbytes > b.offset:
            raise CheckpointError(f"{p}: tensors {a.name!r} and {b.name!r} overlap (bytes {b.offset}.."
                                  f"{a.offset + a.nbytes})")
    split = metadata.get("split.count")
    if isinstance(split, int) and split > 1:
        raise CheckpointError(f"{p}: shard {int(metadata.get('split.no', 0)) + 1} of a GGUF split into {split} files "
                              f"({len(tensors)} of its {metadata.get('split.tensors.count', '?')} tensors): merge them "
                              "first (llama.cpp's llama-gguf-split --merge); fmtsim reads one whole GGUF file")
    g = GGUFFile(p, version, metadata, tensors, alignment, data_start, size)
    end = max((t.offset + t.nbytes for t in tensors), default=data_start)
    if size - end >= alignment:  # writers pad the data to the alignment; more is something else
        g.notes.append(f"{size - end} bytes after the last tensor's data (from byte {end}), not part of any "
                       "tensor: not read")
    if crosscheck:
        crosscheck_gguf(g)
    return g


def crosscheck_gguf(g: GGUFFile) -> None:
    """Compare with gguf-py's reading of the file, where gguf is installed; notes say what was not compared."""
    try:
        import gguf as gguf_py
    except ImportError:
        g.notes.append("gguf (gguf-py) is not installed: the file was read by fmtsim's own parser only, not "
                       "cross-checked (pip install 'fmtsim[checkpoint]')")
        return
    known = {int(v) for v in gguf_py.GGMLQuantizationType}
    unknown = sorted({t.type.name for t in g.tensors if t.type.code not in known})
    sizes = getattr(getattr(gguf_py, "constants", None), "GGML_QUANT_SIZES", {})
    stale = sorted({t.type.name for t in g.tensors if t.type.code in known and
                    sizes.get(gguf_py.GGMLQuantizationType(t.type.code), (t.type.block, t.type.nbytes))
                    != (t.type.block, t.type.nbytes)})
    version_ = getattr(gguf_py, "__version__", None) or _dist_version("gguf")
    if stale:  # gguf 0.19.0 still gives Q8_1 its old 40-byte block (ggml-common.h: 36)
        g.notes.append(f"gguf-py {version_} gives {', '.join(stale)} another block size than ggml's: the file was "
                       "read by fmtsim's own parser only")
        return
    version = getattr(gguf_py, "__version__", None) or _dist_version("gguf")
    if unknown:
        g.notes.append(f"gguf-py {version} does not know type(s) {', '.join(unknown)}: the file was read by "
                       "fmtsim's own parser only")
        return
    try:
        r = gguf_py.GGUFReader(g.path)
    except Exception as e:  # gguf-py's own refusal: name it, fmtsim's reading stands
        raise CheckpointError(f"{g.path}: gguf-py {version} cannot read it ({type(e).__name__}: {e}), though "
                              "fmtsim's parser accepts it: report this file") from None
    theirs = {t.name: (int(t.tensor_type), tuple(int(n) for n in reversed(t.shape.tolist())),
                       int(t.data_offset), int(t.n_bytes)) for t in r.tensors}
    mine = {t.name: (t.type.code, t.shape, t.offset, t.nbytes) for t in g.tensors}
    if theirs != mine:
        diff = sorted(set(theirs.items()) ^ set(mine.items()))[:3]
        raise CheckpointError(f"{g.path}: fmtsim's and gguf-py's readings of the tensor infos differ: {diff}")


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def iter_values(fh: BinaryIO, t: GGUFTensor, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """The tensor's float32 values in file order (row-major), a bounded chunk of whole blocks at a time."""
    per = max(1, chunk_bytes // t.type.nbytes) * t.type.nbytes
    fh.seek(t.offset)
    left = t.nbytes
    while left:
        n = min(per, left)
        raw = fh.read(n)
        if len(raw) != n:
            raise CheckpointError(f"tensor {t.name!r}: the file ended inside its data")
        left -= n
        blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, t.type.nbytes)
        if t.quantized:
            yield ggml.dequantize_blocks(t.type, blocks)
        else:
            yield np.frombuffer(raw, dtype=ggml.PLAIN_DTYPES[t.type.name])


def read_values(g: GGUFFile, name: str) -> np.ndarray:
    """One tensor: float32 as ggml dequantizes it (quantized types), else its own dtype; numpy shape."""
    t = g.tensor(name)
    with open(g.path, "rb") as fh:
        return np.concatenate(list(iter_values(fh, t))).reshape(t.shape)


def load_gguf(path: str | Path) -> dict[str, np.ndarray]:
    g = read_gguf(path)
    return {t.name: read_values(g, t.name) for t in g.tensors}


def read_raw(g: GGUFFile, t: GGUFTensor) -> np.ndarray:
    """The tensor's bytes as (blocks, bytes per block) uint8."""
    with open(g.path, "rb") as fh:
        fh.seek(t.offset)
        return np.frombuffer(fh.read(t.nbytes), dtype=np.uint8).reshape(-1, t.type.nbytes)


def type_mix(g: GGUFFile) -> dict[str, tuple[int, int, int]]:
    """ggml type -> (tensors, elements, bytes), largest share of bytes first."""
    mix: dict[str, list[int]] = {}
    for t in g.tensors:
        m = mix.setdefault(t.type.name, [0, 0, 0])
        m[0] += 1
        m[1] += t.elements
        m[2] += t.nbytes
    return {k: (v[0], v[1], v[2]) for k, v in sorted(mix.items(), key=lambda kv: -kv[1][2])}


def file_type_name(g: GGUFFile) -> str | None:
    ft = g.metadata.get("general.file_type")
    if ft is None:
        return None
    return PRESETS.get(int(ft), f"file type {ft} (not one fmtsim knows)")


@dataclass
class GGUFInspection:
    path: Path
    version: int
    architecture: str | None
    preset: str | None          # general.file_type's preset, as the file declares it
    dominant: str | None        # the type holding most of the 2-D weights' bytes
    mix: dict[str, tuple[int, int, int]]
    tensors: list[GGUFTensor]
    findings: list[str]
    notes: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "format": "gguf", "version": self.version,
                "architecture": self.architecture, "preset": self.preset, "dominant_type": self.dominant,
                "type_mix": {k: {"tensors": v[0], "elements": v[1], "bytes": v[2]} for k, v in self.mix.items()},
                "tensors": [{"name": t.name, "type": t.type.name, "shape": list(t.shape),
                             "bits_per_weight": t.type.bits_per_weight} for t in self.tensors],
                "findings": self.findings, "notes": self.notes}


def inspect_gguf(path: str | Path) -> GGUFInspection:
    """Type mix, declared preset and whether the weights' types fit it."""
    g = read_gguf(path)
    mix = type_mix(g)
    # the bulk: bytes of the 2-D weights, less the embedding and output matrices (a large
    # vocabulary makes those the biggest tensors of a small model, and presets give them their own type)
    weights = Counter[str]()
    for t in g.tensors:
        if len(t.shape) >= 2 and t.name not in ("token_embd.weight", "output.weight"):
            weights[t.type.name] += t.nbytes
    dominant = weights.most_common(1)[0][0] if weights else None
    preset = file_type_name(g)
    findings = []
    base = PRESET_BASE.get(preset or "")
    if preset is not None and base is not None and dominant is not None and dominant != base:
        findings.append(f"general.file_type says {preset}, whose bulk type is {base}, but most weight bytes are "
                        f"{dominant}")
    undecodable = sorted({t.type.name for t in g.tensors if t.quantized and t.type.decode is None})
    if undecodable:
        findings.append(f"tensors of type(s) {', '.join(undecodable)}, which ggml has no dequantizer for")
    arch = g.metadata.get("general.architecture")
    return GGUFInspection(g.path, g.version, arch if isinstance(arch, str) else None, preset, dominant, mix,
                          g.tensors, findings, g.notes)


def _safetensors_tag(t: GGUFTensor, target: str) -> tuple[str, np.dtype]:
    from .dequant import TARGETS
    if t.quantized:
        tag, dt, _ = TARGETS[target]
        return tag, dt
    dt = ggml.PLAIN_DTYPES[t.type.name]
    tag = {"F32": "F32", "F16": "F16", "BF16": "BF16", "I8": "I8", "I16": "I16", "I32": "I32", "I64": "I64",
           "F64": "F64"}[t.type.name]
    return tag, dt


@dataclass
class GGUFDequantSummary:
    source: Path
    output: Path
    target: str
    dequantized: int
    copied: int
    rounded: int          # values ggml's float32 result did not fit the target exactly
    notes: list[str]
    nan: int = 0          # NaN values (a NaN or Inf scale in the file)


def dequantize_gguf(path: str | Path, output: str | Path, dtype: str = "bfloat16",
                    progress: bool = False) -> GGUFDequantSummary:
    """GGUF -> one safetensors file: quantized tensors as ggml dequantizes them (float32), rounded once
    (to nearest, ties to even) into ``dtype`` if it is narrower; F32/F16/BF16/integer tensors copied unchanged.
    Tensor names and layouts stay GGUF's (llama.cpp's converter permutes Llama's Q/K rows for its RoPE)."""
    from .dequant import TARGETS
    from .files import Entry, Source, check_output, header_bytes

    if dtype not in TARGETS:
        raise CheckpointError(f"dtype {dtype!r}: choose one of {', '.join(TARGETS)}")
    g = read_gguf(path)
    text = str(output)
    into_dir = Path(output).is_dir() or text.endswith(("/", os.sep))
    out = check_output(Source(g.path, [g.path], None, False), output)
    if into_dir:  # OUT/<input name>: the safetensors file is named after the GGUF, not as it
        out = out.with_suffix(".safetensors")
    out.parent.mkdir(parents=True, exist_ok=True)
    bad = [t.name for t in g.tensors if t.quantized and t.type.decode is None]
    if bad:
        raise CheckpointError(f"{g.path}: tensor(s) {', '.join(bad[:3])} are {g.tensor(bad[0]).type.name}, which ggml "
                              "has no dequantizer for; nothing written")
    entries, begin = [], 0
    for t in g.tensors:
        tag, dt = _safetensors_tag(t, dtype)
        n = t.elements * dt.itemsize
        entries.append(Entry(t.name, tag, t.shape, begin, begin + n))
        begin += n
    meta = {"format": "pt", "fmtsim.source": f"gguf v{g.version} {g.path.name}",
            "fmtsim.values": f"ggml's reference dequantization (float32), rounded once to {dtype}"}
    for k in ("general.architecture", "general.name", "general.file_type"):
        if k in g.metadata:
            meta[k] = str(g.metadata[k])
    target_dt = TARGETS[dtype][1]
    rounded = nan = 0
    bar = _bar(sum(t.nbytes for t in g.tensors), f"dequantize {g.path.name}") if progress else None
    with open(g.path, "rb") as fh, ShardWriter(out) as w:
        w.write(header_bytes(entries, {}, meta))
        for t in g.tensors:
            for chunk in iter_values(fh, t):
                if t.quantized:
                    nan += int(np.count_nonzero(np.isnan(chunk)))
                if t.quantized and target_dt != np.float32:
                    narrowed = chunk.astype(target_dt)
                    rounded += int(np.count_nonzero((narrowed.astype(np.float32) != chunk) & ~np.isnan(chunk)))
                    chunk = narrowed
                w.write(np.ascontiguousarray(chunk).tobytes())
                if bar is not None:
                    bar.update(chunk.size * t.type.nbytes // t.type.block)
        w.commit()
    if bar is not None:
        bar.close()
    notes = list(g.notes)
    notes.append("tensor names are GGUF's (blk.N.attn_q.weight ...); the tokenizer and other metadata stay in "
                 "the .gguf (the architecture, name and file type are copied into the safetensors metadata)")
    return GGUFDequantSummary(g.path, out, dtype, sum(t.quantized for t in g.tensors),
                              sum(not t.quantized for t in g.tensors), rounded, notes, nan)


def _bar(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc, file=sys.stderr, leave=False)


def _original_values(original: str | Path) -> dict[str, np.ndarray]:
    """The high-precision tensors a GGUF was quantized from: a GGUF (llama-quantize's input, F32/F16/BF16)
    or a safetensors file or checkpoint with the same tensor names."""
    if is_gguf(original):
        g = read_gguf(original)
        return {t.name: read_values(g, t.name) for t in g.tensors if not t.quantized}
    from .files import load
    return load(original)


def _block_scale(type_name: str, block: np.ndarray) -> str:
    """A block's scale fields in words: d (and m) as float16 values, MXFP4's E8M0 byte, NVFP4's UE4M3 bytes."""
    if type_name == "MXFP4":
        return f"e=0x{int(block[0]):02x}"
    if type_name == "NVFP4":
        return "ue4m3 " + " ".join(f"0x{int(v):02x}" for v in block[:4])
    d = block[:4].view("<f2")
    return f"d={str(d[0])}, m={str(d[1])}" if type_name in ("Q4_1", "Q5_1") else f"d={str(d[0])}"


def explain_gguf(quant: str | Path, original: str | Path) -> list[Any]:
    """Which GGUF tensors ggml's reference quantizer (llama-quantize without an importance matrix) made
    from ``original``, block for block; the K- and I-quants are said not to be examined, and why."""
    from .explain import BlockMiss, TensorExplanation
    from .ggml_quant import REFERENCE_QUANTIZERS, quantize_ref

    g = read_gguf(quant)
    orig = _original_values(original)
    quantized = [t for t in g.tensors if t.quantized]
    if not quantized:
        raise CheckpointError(f"{g.path}: no quantized tensor (every tensor is F32/F16/BF16 or an integer)")
    if not any(t.name in orig for t in quantized):
        raise CheckpointError(f"{original}: holds none of the {len(quantized)} quantized tensors of {g.path} (no "
                              f"{quantized[0].name!r}, ...): not its original; nothing was compared")
    recipe = "ggml reference quantizer (llama-quantize, no imatrix)"
    rows = []
    for t in quantized:
        if t.name not in orig:
            rows.append(TensorExplanation(t.name, "gguf", 0, {}, "-", 0,
                                          notes=[f"no tensor {t.name!r} in the original"]))
            continue
        if t.type.name not in REFERENCE_QUANTIZERS:
            why = "is made by a search over scales (and, for the I-quants, grids)"
            rows.append(TensorExplanation(t.name, "gguf", 0, {}, "-", 0, notes=[
                f"{t.type.name} {why}; fmtsim reproduces ggml's reference quantizers of "
                f"{', '.join(REFERENCE_QUANTIZERS)}"]))
            continue
        w = np.asarray(orig[t.name])
        if tuple(w.shape) != t.shape:
            raise CheckpointError(f"{t.name}: original is {list(w.shape)}, the GGUF tensor is {list(t.shape)}")
        expected = quantize_ref(t.type.name, w.astype(np.float32))
        found = read_raw(g, t)
        same = (expected == found).all(axis=1)
        misses = []
        for b in np.flatnonzero(~same)[:5]:
            want = ggml.dequantize_blocks(t.type, expected[b:b + 1]).view(np.uint32)
            got = ggml.dequantize_blocks(t.type, found[b:b + 1]).view(np.uint32)
            k = np.flatnonzero(want != got)
            detail = (f"element {int(k[0])} is {str(got.view(np.float32)[k[0]])}, the reference gives "
                      f"{str(want.view(np.float32)[k[0]])} ({len(k)} of {t.type.block} elements differ)") if len(k) \
                else "the bytes differ but every value is the same"
            misses.append(BlockMiss([int(b)], recipe, _block_scale(t.type.name, expected[b]),
                                    _block_scale(t.type.name, found[b]), detail=detail))
        n_same = int(same.sum())
        rows.append(TensorExplanation(t.name, "gguf", len(same), {recipe: n_same}, recipe, len(same) - n_same,
                                      misses=misses))
    return rows


@dataclass
class GGUFTensorDiff:
    tensor: str
    types: tuple[str, str]
    blocks: int              # blocks compared (same type), else 0
    blocks_differ: int
    values: int
    values_differ: int       # by their float32 bits (NaN equal to NaN)
    largest: float           # the largest |a - b| over the values
    first: int | None        # the first differing flat index


def diff_gguf(a: str | Path, b: str | Path) -> tuple[list[GGUFTensorDiff], list[str]]:
    """Two GGUF files of the same model: per tensor in both, the blocks and the values that differ."""
    ga, gb = read_gguf(a), read_gguf(b)
    names_b = {t.name for t in gb.tensors}
    common = [t for t in ga.tensors if t.name in names_b]
    if not common:
        raise CheckpointError(f"{ga.path} and {gb.path} share no tensor name: not two versions of one model")
    notes = []
    only = sorted({t.name for t in ga.tensors} ^ names_b)
    if only:
        notes.append(f"{len(only)} tensor(s) in one file only, not compared: {', '.join(only[:5])}"
                     + (" ..." if len(only) > 5 else ""))
    out = []
    for ta in common:
        tb = gb.tensor(ta.name)
        if ta.shape != tb.shape:
            raise CheckpointError(f"{ta.name}: {list(ta.shape)} in {ga.path}, {list(tb.shape)} in {gb.path}")
        blocks = differ = 0
        if ta.type is tb.type and ta.quantized:
            ra, rb = read_raw(ga, ta), read_raw(gb, tb)
            blocks, differ = len(ra), int(np.count_nonzero((ra != rb).any(axis=1)))
        va = read_values(ga, ta.name).astype(np.float32).reshape(-1)
        vb = read_values(gb, tb.name).astype(np.float32).reshape(-1)
        neq = (va.view(np.uint32) != vb.view(np.uint32)) & ~(np.isnan(va) & np.isnan(vb))
        with np.errstate(invalid="ignore", over="ignore"):
            gap = np.abs(va.astype(np.float64) - vb.astype(np.float64))
        largest = float(np.nanmax(gap[neq])) if neq.any() else 0.0
        first = int(np.flatnonzero(neq)[0]) if neq.any() else None
        out.append(GGUFTensorDiff(ta.name, (ta.type.name, tb.type.name), blocks, differ, va.size,
                                  int(neq.sum()), largest, first))
    return out, notes + ga.notes + gb.notes
