"""OCP FP8 safetensors checkpoints -> AMD FNUZ (and loading any safetensors file).

A checkpoint is one ``.safetensors`` file or a directory with
``model.safetensors.index.json`` and its shards; the output has the same
shape. FP8 tensors (``F8_E4M3``, ``F8_E5M2``) keep their bits except the
specials (fmtsim.fnuz) and are tagged ``F8_E4M3FNUZ`` / ``F8_E5M2FNUZ``; every
scale that multiplies them is doubled in its own dtype; everything else is
copied byte for byte.

Which scales are doubled, and why (a scale ``s`` multiplies FP8 codes ``q``:
``x = q * s``; the same bits read as FNUZ are worth half, so ``s`` doubles):

    <fp8 tensor>_scale          weight scales: compressed-tensors / llm-compressor,
    (.weight_scale)             NVIDIA ModelOpt, FBGEMM, AMD Quark (per tensor,
                                per channel [out, 1] or per block)
    <fp8 tensor>_scale_inv      DeepSeek-V3 128x128 block scales
    (.weight_scale_inv)         [ceil(out/128), ceil(in/128)]: despite the name they
                                multiply (w = q * s), so they double too
    <layer>.input_scale         static activation scales (compressed-tensors, ModelOpt,
    <layer>.output_scale        Quark): the activations become FNUZ FP8 as well, and
                                vLLM's normalize_e4m3fn_to_e4m3fnuz doubles input_scale
    .k_scale .v_scale           FP8 KV-cache / attention scales (vLLM, ModelOpt, Quark):
    .kv_scale .q_scale          the cache is FNUZ on FNUZ hardware, so they double
    .prob_scale
    .input_scale_ub             FBGEMM's bound on activation magnitude: a value, not a
                                multiplier of codes: copied unchanged

A tensor whose name ends in a scale-like word and matches none of these is
refused by name (``keep_scales`` / ``double_scales`` glob patterns resolve
it); an FP8 tensor with no weight scale is refused unless
``allow_unscaled=True`` (its values then halve, and the summary says so).

Reading: every header is parsed and validated here (sizes, offsets, duplicate
names) and cross-checked with the ``safetensors`` package's own parser; data
are read in bounded chunks with ``readinto``. safetensors 0.8's numpy loader
cannot return FP8 tensors (it asks numpy for ``float8_e4m3fn``), and a memory
map would count the whole shard in the resident set.

Writing: each output file is written to a temporary name in the output
directory, re-read and verified (unless ``verify=False``), then renamed. The
conversion is recorded in the header metadata under ``fmtsim_conversion``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from . import __version__
from .fileio import atomic_write
from .fnuz import ocp_to_fnuz, scale_by_power_of_two

__all__ = ["Header", "read_header", "load", "plan", "convert", "ConversionPlan", "ConversionSummary",
           "CheckpointError", "DTYPES"]

INDEX_NAME = "model.safetensors.index.json"
META_KEY = "fmtsim_conversion"
CHUNK_BYTES = 1 << 19  # 512 KiB: measured ~8% faster than 1 MiB here (the work stays in L2)

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype(np.float64), "F32": np.dtype(np.float32), "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64), "I32": np.dtype(np.int32), "I16": np.dtype(np.int16), "I8": np.dtype(np.int8),
    "U64": np.dtype(np.uint64), "U32": np.dtype(np.uint32), "U16": np.dtype(np.uint16), "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_), "C64": np.dtype(np.complex64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz), "F8_E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
}
OCP_FP8 = {"F8_E4M3": ("e4m3", "F8_E4M3FNUZ"), "F8_E5M2": ("e5m2", "F8_E5M2FNUZ")}
FNUZ_TAGS = {"F8_E4M3FNUZ", "F8_E5M2FNUZ"}
SCALE_FLOATS = {"F64", "F32", "F16", "BF16"}
ACTIVATION_SUFFIXES = (".input_scale", ".output_scale")
ATTENTION_SUFFIXES = (".k_scale", ".v_scale", ".kv_scale", ".q_scale", ".prob_scale")
UNCHANGED_SUFFIXES = (".input_scale_ub",)


class CheckpointError(Exception):
    """A problem with the input or output of a conversion; nothing was written."""


# ---- reading ------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # byte offsets relative to the data section
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass
class Header:
    path: Path
    entries: dict[str, Entry]
    metadata: dict[str, str]
    data_start: int
    file_size: int
    raw: bytes = field(repr=False, default=b"")

    def ordered(self) -> list[Entry]:
        return sorted(self.entries.values(), key=lambda e: e.begin)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for k, v in pairs:
        if k in seen:
            raise CheckpointError(f"duplicated tensor name {k!r}")
        seen[k] = v
    return seen


def read_header(path: str | Path) -> Header:
    """Parse and validate a safetensors header; CheckpointError names the file and the problem."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{p}: truncated file ({size} bytes, no header length)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise CheckpointError(f"{p}: truncated file: header of {n} bytes, file has {size}")
            raw = fh.read(n)
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read: {e.strerror}") from None
    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except CheckpointError as e:
        raise CheckpointError(f"{p}: corrupt header: {e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{p}: corrupt header: {e}") from None
    if not isinstance(obj, dict):
        raise CheckpointError(f"{p}: corrupt header: not a JSON object")
    meta = obj.pop("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{p}: corrupt header: __metadata__ must map strings to strings")
    data_size = size - 8 - n
    entries: dict[str, Entry] = {}
    for name, info in obj.items():
        try:
            dtype = info["dtype"]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{p}: corrupt header entry for tensor {name!r}: {info!r}") from None
        if not 0 <= begin <= end <= data_size:
            raise CheckpointError(
                f"{p}: tensor {name!r} offsets [{begin}, {end}] out of range (data section is {data_size} bytes)"
            )
        if dtype in DTYPES:
            want = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize
            if want != end - begin:
                raise CheckpointError(f"{p}: tensor {name!r} {dtype}{list(shape)} needs {want} bytes, "
                                      f"header gives {end - begin}")
        entries[name] = Entry(name, dtype, shape, begin, end)
    ordered = sorted(entries.values(), key=lambda e: e.begin)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.begin < a.end:
            raise CheckpointError(f"{p}: tensors {a.name!r} and {b.name!r} overlap")
    return Header(p, entries, dict(meta), 8 + n, size, raw)


def _crosscheck_with_safetensors(h: Header) -> None:
    """The reference parser must accept the file and agree on names, dtypes and shapes."""
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - safetensors is a declared dependency of this module
        return
    try:
        with safe_open(str(h.path), framework="np") as f:
            names = set(f.keys())
            for name in names:
                sl = f.get_slice(name)
                e = h.entries.get(name)
                if e is None or tuple(sl.get_shape()) != e.shape or sl.get_dtype() != e.dtype:
                    raise CheckpointError(f"{h.path}: safetensors disagrees about tensor {name!r}")
    except CheckpointError:
        raise
    except Exception as e:  # the reference parser's own error types
        raise CheckpointError(f"{h.path}: rejected by the safetensors parser: {e}") from None
    if names != set(h.entries):
        raise CheckpointError(f"{h.path}: safetensors lists different tensors")


def _chunks(fh: Any, h: Header, e: Entry, buf: np.ndarray) -> Iterator[np.ndarray]:
    """The tensor's bytes, in order, through a reused buffer."""
    fh.seek(h.data_start + e.begin)
    left = e.nbytes
    while left:
        m = min(left, buf.size)
        view = buf[:m]
        got = fh.readinto(view.data)
        if got != m:
            raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
        yield view
        left -= m


def _read_tensor(fh: Any, h: Header, e: Entry) -> np.ndarray:
    fh.seek(h.data_start + e.begin)
    data = fh.read(e.nbytes)
    if len(data) != e.nbytes:
        raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
    return np.frombuffer(data, dtype=np.uint8).copy()


def _shards(path: Path) -> tuple[list[Path], dict[str, Any] | None]:
    if path.is_file():
        return [path], None
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such file or directory")
    index_path = path / INDEX_NAME
    if index_path.exists():
        try:
            index = json.loads(index_path.read_text())
            weight_map = index["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise CheckpointError(f"{index_path}: corrupt index: {e}") from None
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (path / n).is_file()]
        if missing:
            raise CheckpointError(f"{index_path}: shard(s) listed but missing: {', '.join(missing)}")
        return [path / n for n in names], index
    files = sorted(path.glob("*.safetensors"))
    if len(files) != 1:
        raise CheckpointError(f"{path}: a directory needs {INDEX_NAME} (or exactly one .safetensors file)")
    return files, None


def load(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a file or sharded directory, with the ml_dtypes dtype of its tag
    (FNUZ included). Reads everything into memory: for inspection and tests."""
    shards, _ = _shards(Path(path))
    out: dict[str, np.ndarray] = {}
    for shard in shards:
        h = read_header(shard)
        with open(shard, "rb") as fh:
            for e in h.ordered():
                if e.dtype not in DTYPES:
                    raise CheckpointError(f"{shard}: tensor {e.name!r} has dtype {e.dtype} with no numpy type")
                if e.name in out:
                    raise CheckpointError(f"{shard}: tensor {e.name!r} also appears in another shard")
                out[e.name] = _read_tensor(fh, h, e).view(DTYPES[e.dtype]).reshape(e.shape)
    return out


# ---- planning -----------------------------------------------------------------------


@dataclass
class ConversionPlan:
    """What a conversion will do: tensor name -> action, and everything it found."""

    source: Path
    shards: list[Path]
    index: dict[str, Any] | None
    headers: dict[Path, Header]
    where: dict[str, Path]  # tensor -> shard
    fp8: dict[str, str] = field(default_factory=dict)  # tensor -> 'e4m3' | 'e5m2'
    doubled: dict[str, str] = field(default_factory=dict)  # scale -> why
    unchanged_scales: dict[str, str] = field(default_factory=dict)
    unscaled: list[str] = field(default_factory=list)

    def action(self, name: str) -> str:
        if name in self.fp8:
            return "fp8"
        if name in self.doubled:
            return "double"
        return "copy"

    @property
    def total_bytes(self) -> int:
        return sum(h.file_size for h in self.headers.values())


def _is_scale_like(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return "scale" in last


def plan(
    path: str | Path,
    *,
    allow_unscaled: bool = False,
    keep_scales: tuple[str, ...] = (),
    double_scales: tuple[str, ...] = (),
) -> ConversionPlan:
    """Find the FP8 tensors and the scales that multiply them; refuse what is unclear."""
    src = Path(path)
    shards, index = _shards(src)
    headers = {s: read_header(s) for s in shards}
    for h in headers.values():
        _crosscheck_with_safetensors(h)
    where: dict[str, Path] = {}
    for s, h in headers.items():
        for name in h.entries:
            if name in where:
                raise CheckpointError(f"duplicated tensor name {name!r} in {where[name].name} and {s.name}")
            where[name] = s
    if index is not None:
        for name, shard in index["weight_map"].items():
            if where.get(name) != src / shard:
                raise CheckpointError(f"{INDEX_NAME}: {name!r} is listed in {shard} but that shard lacks it")
    p = ConversionPlan(src, shards, index, headers, where)
    done = [h for h in headers.values() if META_KEY in h.metadata]
    fnuz = [(n, h.entries[n].dtype) for h in headers.values() for n in h.entries if h.entries[n].dtype in FNUZ_TAGS]
    if done or fnuz:
        what = f"metadata '{META_KEY}' in {done[0].path.name}" if done else f"tensor {fnuz[0][0]!r} is {fnuz[0][1]}"
        raise CheckpointError(f"{src}: input is already FNUZ ({what}); nothing to do")

    dtype_of = {n: headers[where[n]].entries[n].dtype for n in where}
    p.fp8 = {n: OCP_FP8[d][0] for n, d in dtype_of.items() if d in OCP_FP8}
    has_weight_scale: set[str] = set()
    unknown: list[str] = []
    for name, dt in dtype_of.items():
        if name in p.fp8:
            continue
        target = None
        for suffix in ("_scale", "_scale_inv"):
            if name.endswith(suffix) and name[: -len(suffix)] in p.fp8:
                target = name[: -len(suffix)]
        why = None
        if any(fnmatch.fnmatchcase(name, pat) for pat in keep_scales):
            p.unchanged_scales[name] = "kept by --keep-scale"
            continue
        if target is not None:
            why = f"multiplies {target}"
            has_weight_scale.add(target)
        elif name.endswith(UNCHANGED_SUFFIXES):
            p.unchanged_scales[name] = "activation bound (FBGEMM input_scale_ub), not a multiplier"
            continue
        elif name.endswith(ACTIVATION_SUFFIXES):
            layer = name.rsplit(".", 1)[0]
            if f"{layer}.weight" in p.fp8 or layer.endswith(("k_proj", "v_proj")):
                why = f"activation scale of {layer}"
            else:
                raise CheckpointError(f"{name}: activation scale of a layer without an FP8 weight; "
                                      "say what it is with --keep-scale or --double-scale")
        elif name.endswith(ATTENTION_SUFFIXES):
            why = "FP8 attention / KV-cache scale"
        elif any(fnmatch.fnmatchcase(name, pat) for pat in double_scales):
            why = "doubled by --double-scale"
        elif _is_scale_like(name):
            unknown.append(name)
            continue
        if why is None:
            continue
        if dt not in SCALE_FLOATS:
            raise CheckpointError(f"{name}: a scale stored as {dt}; only F64/F32/F16/BF16 scales can be doubled")
        p.doubled[name] = why
    if unknown:
        raise CheckpointError(
            "cannot tell what these scale-like tensors multiply: " + ", ".join(sorted(unknown)[:20])
            + ("" if len(unknown) <= 20 else f" (and {len(unknown) - 20} more)")
            + "; name them with --keep-scale PATTERN or --double-scale PATTERN"
        )
    p.unscaled = sorted(set(p.fp8) - has_weight_scale)
    if p.unscaled and not allow_unscaled:
        raise CheckpointError(
            f"{len(p.unscaled)} FP8 tensor(s) have no scale: " + ", ".join(p.unscaled[:20])
            + "; pass --allow-unscaled to convert them anyway (their values then halve)"
        )
    return p


# ---- converting one shard ------------------------------------------------------------


@dataclass
class ShardResult:
    shard: str
    skipped: bool = False
    tensors: int = 0
    bytes: int = 0
    fp8_tensors: int = 0
    neg_zero: int = 0
    nan: int = 0
    inf: int = 0
    scales_doubled: int = 0
    verified: bool = False
    seconds: float = 0.0


def _header_bytes(entries: list[Entry], tags: dict[str, str], metadata: dict[str, str]) -> bytes:
    obj: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    for e in entries:
        obj[e.name] = {"dtype": tags.get(e.name, e.dtype), "shape": list(e.shape),
                       "data_offsets": [e.begin, e.end]}
    raw = json.dumps(obj, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors aligns the data section to 8 bytes
    return struct.pack("<Q", len(raw)) + raw


def _fingerprint(h: Header) -> str:
    st = h.path.stat()
    return hashlib.sha256(h.raw + f"{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()


class _Scratch:
    """Reused work buffers: fresh megabyte arrays would page-fault on every chunk."""

    def __init__(self) -> None:
        self.u8 = np.empty(CHUNK_BYTES, dtype=np.uint8)
        self.mask = np.empty(CHUNK_BYTES, dtype=bool)
        self.mask2 = np.empty(CHUNK_BYTES, dtype=bool)
        self.diff = np.empty(CHUNK_BYTES, dtype=bool)


def _special_mask(chunk: np.ndarray, fmt: str, scratch: _Scratch) -> np.ndarray:
    """Bytes that are -0, NaN or Inf in OCP ``fmt`` (the only codes whose bits change)."""
    n = chunk.size
    m = 0x7F if fmt == "e4m3" else 0x7C
    tmp, mask, extra = scratch.u8[:n], scratch.mask[:n], scratch.mask2[:n]
    np.bitwise_and(chunk, m, out=tmp)
    np.equal(tmp, m, out=mask)
    np.equal(chunk, 0x80, out=extra)
    np.logical_or(mask, extra, out=mask)
    return mask


@dataclass
class _Job:
    shard: Path
    out_path: Path
    plan_fp8: dict[str, str]
    plan_doubled: dict[str, str]
    inf: str | None
    verify: bool


def _convert_shard(job: _Job, progress: Callable[[int], None] | None = None) -> ShardResult:
    t0 = time.perf_counter()
    h = read_header(job.shard)
    res = ShardResult(job.shard.name, bytes=h.file_size, tensors=len(h.entries))
    fingerprint = _fingerprint(h)
    if job.out_path.exists():
        try:
            prior = read_header(job.out_path)
            info = json.loads(prior.metadata.get(META_KEY, "{}"))
            if info.get("source_fingerprint") == fingerprint and info.get("verified"):
                res.skipped = True
                if progress:
                    progress(h.file_size)
                return res
        except (CheckpointError, json.JSONDecodeError):
            pass
    # code -> code tables; Inf codes met without an --inf choice are refused before use
    luts = {fmt: ocp_to_fnuz(np.arange(256, dtype=np.uint8), fmt, inf=job.inf or "nan")[0]
            for fmt in set(job.plan_fp8.values())}
    tags = {n: OCP_FP8[h.entries[n].dtype][1] for n in h.entries if n in job.plan_fp8}
    conv = {"source_format": "OCP", "target_format": "FNUZ", "scale_multiplier": 2.0,
            "fmtsim_version": __version__, "source_file": job.shard.name,
            "source_fingerprint": fingerprint, "verified": job.verify,
            "fp8_tensors": sorted(tags), "scales_doubled": sorted(n for n in h.entries if n in job.plan_doubled)}
    meta = dict(h.metadata)
    meta[META_KEY] = json.dumps(conv, separators=(",", ":"))
    header = _header_bytes(h.ordered(), tags, meta)
    tmp = job.out_path.with_name(f".{job.out_path.name}.tmp-{os.getpid()}")
    buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    scratch = _Scratch()
    try:
        with open(job.shard, "rb") as src, open(tmp, "wb") as dst:
            dst.write(header)
            pos = 0
            for e in h.ordered():
                if e.begin > pos:  # keep any padding between tensors as it was
                    src.seek(h.data_start + pos)
                    dst.write(src.read(e.begin - pos))
                if e.name in job.plan_fp8:
                    fmt = job.plan_fp8[e.name]
                    res.fp8_tensors += 1
                    for chunk in _chunks(src, h, e, buf):
                        special = _special_mask(chunk, fmt, scratch)
                        if special.any():
                            idx = np.flatnonzero(special)
                            vals = chunk[idx]
                            neg_zero = int(np.count_nonzero(vals == 0x80))
                            infs = int(np.count_nonzero((vals & 0x7F) == 0x7C)) if fmt == "e5m2" else 0
                            if infs and job.inf is None:
                                raise CheckpointError(f"{job.shard}: tensor {e.name!r} holds E5M2 Inf codes; "
                                                      "pass --inf nan|max|ocp_max")
                            res.neg_zero += neg_zero
                            res.inf += infs
                            res.nan += int(idx.size) - neg_zero - infs
                            chunk[idx] = luts[fmt][vals]
                        dst.write(chunk.data)
                        if progress:
                            progress(chunk.size)
                elif e.name in job.plan_doubled:
                    raw = _read_tensor(src, h, e).view(DTYPES[e.dtype])
                    dst.write(scale_by_power_of_two(raw, 2.0, e.name).tobytes())
                    res.scales_doubled += 1
                    if progress:
                        progress(e.nbytes)
                else:
                    for chunk in _chunks(src, h, e, buf):
                        dst.write(chunk.data)
                        if progress:
                            progress(chunk.size)
                pos = e.end
            tail = h.file_size - h.data_start - pos
            if tail:
                src.seek(h.data_start + pos)
                dst.write(src.read(tail))
            dst.flush()
            os.fsync(dst.fileno())
        if job.verify:
            _verify_shard(h, tmp, job, luts, scratch)
            res.verified = True
        os.replace(tmp, job.out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    res.seconds = time.perf_counter() - t0
    return res


def _verify_shard(h: Header, out_path: Path, job: _Job, luts: dict[str, np.ndarray], scratch: _Scratch) -> None:
    """Re-read the written file: FP8 codes against the rule, scales exactly doubled,
    every other tensor byte-identical."""
    o = read_header(out_path)
    _crosscheck_with_safetensors(o)
    if set(o.entries) != set(h.entries):
        raise CheckpointError(f"{out_path}: verification failed: tensor names differ")
    a_buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    b_buf = np.empty(CHUNK_BYTES, dtype=np.uint8)
    with open(h.path, "rb") as a, open(out_path, "rb") as b:
        for e in h.ordered():
            oe = o.entries[e.name]
            if (oe.shape, oe.begin, oe.end) != (e.shape, e.begin, e.end):
                raise CheckpointError(f"{out_path}: verification failed: {e.name!r} moved or reshaped")
            if e.name in job.plan_doubled:
                old = _read_tensor(a, h, e).view(DTYPES[e.dtype]).astype(np.float64)
                new = _read_tensor(b, o, oe).view(DTYPES[oe.dtype]).astype(np.float64)
                if oe.dtype != e.dtype or not np.array_equal(new, old * 2, equal_nan=True):
                    raise CheckpointError(f"{out_path}: verification failed: scale {e.name!r} is not 2x")
                continue
            fmt = job.plan_fp8.get(e.name)
            want_tag = OCP_FP8[e.dtype][1] if fmt else e.dtype
            if oe.dtype != want_tag:
                raise CheckpointError(f"{out_path}: verification failed: {e.name!r} tagged {oe.dtype}")
            for ca, cb in zip(_chunks(a, h, e, a_buf), _chunks(b, o, oe, b_buf), strict=True):
                if fmt is None:
                    same = np.array_equal(ca, cb)
                else:
                    # every byte keeps its bits unless it is an OCP special, which must follow the rule
                    special = _special_mask(ca, fmt, scratch)
                    diff = np.not_equal(ca, cb, out=scratch.diff[: ca.size])
                    same = np.array_equal(diff, special)
                    if same and special.any():
                        idx = np.flatnonzero(special)
                        same = np.array_equal(cb[idx], luts[fmt][ca[idx]])
                if not same:
                    raise CheckpointError(f"{out_path}: verification failed in tensor {e.name!r}")


# ---- the whole conversion --------------------------------------------------------------


@dataclass
class ConversionSummary:
    plan: ConversionPlan
    shards: list[ShardResult]
    seconds: float
    dry_run: bool = False

    def totals(self) -> dict[str, int]:
        keys = ("tensors", "bytes", "fp8_tensors", "neg_zero", "nan", "inf", "scales_doubled")
        return {k: sum(getattr(s, k) for s in self.shards) for k in keys}


def _check_output(src: Path, out: Path, is_dir: bool) -> None:
    s, o = src.resolve(), out.resolve()
    if o == s or (is_dir and s in o.parents):
        raise CheckpointError(f"output {out} is inside the input {src}")
    parent = o if is_dir else o.parent
    probe = parent if parent.exists() else next((q for q in parent.parents if q.exists()), Path("/"))
    if not os.access(probe, os.W_OK):
        raise CheckpointError(f"output directory {probe} is not writable")


def convert(
    src: str | Path,
    out: str | Path,
    *,
    inf: str | None = None,
    allow_unscaled: bool = False,
    keep_scales: tuple[str, ...] = (),
    double_scales: tuple[str, ...] = (),
    dry_run: bool = False,
    jobs: int = 1,
    verify: bool = True,
    progress: bool = False,
) -> ConversionSummary:
    """Convert an OCP FP8 checkpoint to FNUZ. See the module docstring for every rule."""
    t0 = time.perf_counter()
    src_p, out_p = Path(src), Path(out)
    p = plan(src_p, allow_unscaled=allow_unscaled, keep_scales=keep_scales, double_scales=double_scales)
    is_dir = src_p.is_dir()
    _check_output(src_p, out_p, is_dir)
    if dry_run:
        return ConversionSummary(p, [], time.perf_counter() - t0, dry_run=True)
    if inf is not None and inf not in ("nan", "max", "ocp_max"):
        raise CheckpointError("--inf must be nan, max or ocp_max")
    out_dir = out_p if is_dir else out_p.parent
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckpointError(f"cannot create output directory {out_dir}: {e.strerror}") from None
    jobs_list = [
        _Job(s, (out_p / s.name) if is_dir else out_p, {n: f for n, f in p.fp8.items() if p.where[n] == s},
             {n: w for n, w in p.doubled.items() if p.where[n] == s}, inf, verify)
        for s in p.shards
    ]
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=p.total_bytes, unit="B", unit_scale=True, desc="fnuz convert")
        except ImportError:
            bar = None
    update = bar.update if bar is not None else None
    results: list[ShardResult] = []
    if jobs <= 1 or len(jobs_list) == 1:
        for j in jobs_list:
            results.append(_convert_shard(j, update))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_convert_shard, j) for j in jobs_list]
            for fut in futures:
                r = fut.result()
                results.append(r)
                if update:
                    update(r.bytes)
    if bar is not None:
        bar.close()
    if is_dir:
        _write_side_files(src_p, out_p, p, inf)
    return ConversionSummary(p, results, time.perf_counter() - t0)


def _write_side_files(src: Path, out: Path, p: ConversionPlan, inf: str | None) -> None:
    """Index (with a conversion note), config.json (quantization_config annotated), the rest copied."""
    note = {"source_format": "OCP", "target_format": "FNUZ", "scale_multiplier": 2.0,
            "fmtsim_version": __version__, "inf": inf, "scales_doubled": len(p.doubled),
            "fp8_tensors": len(p.fp8)}
    shard_names = {s.name for s in p.shards}
    for item in sorted(src.iterdir()):
        if item.name in shard_names or not item.is_file() or item.name.startswith("."):
            continue
        target = out / item.name
        if item.name == INDEX_NAME and p.index is not None:
            index = dict(p.index)
            index["metadata"] = dict(index.get("metadata") or {}, **{META_KEY: note})
            atomic_write(target, json.dumps(index, indent=2) + "\n")
        elif item.name == "config.json":
            try:
                cfg = json.loads(item.read_text())
            except json.JSONDecodeError as e:
                raise CheckpointError(f"{item}: not valid JSON: {e}") from None
            qc = cfg.get("quantization_config")
            if isinstance(qc, dict):
                qc[META_KEY] = note
            cfg[META_KEY] = note
            atomic_write(target, json.dumps(cfg, indent=2) + "\n")
        else:
            tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
            shutil.copyfile(item, tmp)
            os.replace(tmp, target)
