"""Safetensors files: reading and validating headers, streaming tensor bytes,
finding a checkpoint's shards, and writing output files so that nothing is ever
left half-written under its final name.

A checkpoint is one ``.safetensors`` file, a directory with
``model.safetensors.index.json`` and its shards (or exactly one ``.safetensors``
file), or a Hugging Face cache entry (``models--ORG--NAME`` with ``refs/main`` and
``snapshots/REV``).

Reading: every header is parsed and validated here, by the format's own rules (sizes,
dtype tags, duplicate names, tensors covering the data section exactly: no hole, no
overlap, no trailing byte), and cross-checked with the ``safetensors`` package's own
parser when it is installed (a warning says so when it is not); an index must map every
tensor of its shards, each to a plain file name in the folder; data are
read in bounded chunks with ``readinto``. safetensors 0.8's numpy loader cannot
return FP8 tensors (it asks numpy for ``float8_e4m3fn``), and a memory map would
count the whole shard in the resident set.

Writing: :class:`ShardWriter` writes to ``.NAME.tmp-PID`` beside the final name,
fsyncs and renames; a failed write (disk full, read-only) removes the temporary
file and raises :class:`CheckpointError` naming the file. Temporary files left by
a killed run (their PID no longer alive) are removed by :func:`remove_stale_temps`.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import struct
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import ml_dtypes
import numpy as np

from .. import argcheck
from ..argcheck import path as check_path
from ..executor import get_executor
from ..fileio import UnsafeOutputError, check_replaceable

__all__ = ["CheckpointError", "DTYPES", "Entry", "Header", "INDEX_NAME", "read_header", "crosscheck",
           "chunks", "read_tensor", "Source", "find_source", "load", "header_bytes", "ShardWriter",
           "remove_stale_temps", "check_output", "copy_side_files", "write_chunk", "read_headers", "check_paths",
           "worker_count", "run_shards", "crosscheck_available", "CrosscheckSkipped", "NO_CROSSCHECK"]

INDEX_NAME = "model.safetensors.index.json"
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
# every dtype tag the safetensors format defines (safetensors 0.8's Dtype enum, as its parser lists them)
SAFETENSORS_TAGS = frozenset({"BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
                              "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
                              "C64", "F64", "I64", "U64"})
MAX_HEADER_BYTES = 100_000_000  # safetensors' limit on the JSON header
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)(?:-[0-9a-f]+)?$")


class CheckpointError(ValueError):
    """A problem with the input or output of a checkpoint job; nothing was written under a final name.
    A ValueError, as every refusal of bad input in fmtsim's API is."""


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
    """Parse and validate a safetensors header; CheckpointError names the file and the problem.

    The rules are the safetensors format's own (checked against safetensors 0.8's parser, which
    applies them too): a header of at most 100,000,000 bytes holding a UTF-8 JSON object; known
    dtype tags; sizes that match shape x dtype; and tensors that cover the data section exactly,
    in offset order, with no hole, no overlap and no trailing byte. They hold whether or not the
    safetensors package is installed."""
    check_path(path, "read_header: path")
    p = Path(path)
    try:
        if not p.is_file():
            raise CheckpointError(f"{p}: not a regular file")
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{p}: truncated file ({size} bytes, no header length)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8 or n > MAX_HEADER_BYTES:
                raise CheckpointError(_not_safetensors(p, head, n, size))
            raw = fh.read(n)
    except OSError as e:
        raise CheckpointError(f"{p}: cannot read: {e.strerror}") from None
    if not raw.lstrip(b" \t\r\n").startswith(b"{"):
        raise CheckpointError(f"{p}: not a safetensors file: the header does not begin with a JSON object "
                              f"(it begins {raw[:16]!r})")
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
            raw_shape, raw_offsets = info["shape"], info["data_offsets"]
            # JSON integers only: 1.5 or true is not a dimension, and a negative one is no size
            if not all(type(d) is int and d >= 0 for d in [*raw_shape, *raw_offsets]) or len(raw_offsets) != 2:
                raise ValueError
            if not isinstance(dtype, str):
                raise ValueError
            shape = tuple(raw_shape)
            begin, end = raw_offsets
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{p}: corrupt header entry for tensor {name!r}: {str(info)[:200]}") from None
        if dtype not in SAFETENSORS_TAGS:
            raise CheckpointError(f"{p}: tensor {name!r} has dtype {dtype!r}, which is not a safetensors dtype")
        if not 0 <= begin <= end <= data_size:
            raise CheckpointError(
                f"{p}: tensor {name!r} offsets [{begin}, {end}] out of range (data section is {data_size} bytes)"
            )
        if dtype in DTYPES:
            want = math.prod(shape) * DTYPES[dtype].itemsize  # Python ints: no int64 wrap-around
            if want != end - begin:
                raise CheckpointError(f"{p}: tensor {name!r} {dtype}{list(shape)} needs {want} bytes, "
                                      f"header gives {end - begin}")
        entries[name] = Entry(name, dtype, shape, begin, end)
    # the data section is the tensors, back to back in offset order (safetensors' own rule): a hole
    # or trailing bytes are data no tensor owns, and other readers refuse the file
    pos, prev = 0, None
    for t in sorted(entries.values(), key=lambda t: (t.begin, t.end)):
        if t.begin < pos and prev is not None:
            raise CheckpointError(f"{p}: tensors {prev.name!r} and {t.name!r} overlap")
        if t.begin > pos:
            raise CheckpointError(f"{p}: a hole of {t.begin - pos} bytes before tensor {t.name!r} (data bytes "
                                  f"[{pos}, {t.begin}) belong to no tensor)")
        pos, prev = t.end, t
    if pos != data_size:
        raise CheckpointError(f"{p}: {data_size - pos} trailing bytes after the last tensor (the data section is "
                              f"{data_size} bytes, the tensors cover {pos}): the header does not cover the file")
    return Header(p, entries, dict(meta), 8 + n, size, raw)


# Other containers a model file comes in, by their first bytes: named in the refusal, so a user
# who passed a llama.cpp or a torch.save file learns what it is rather than a header length
_CONTAINERS: tuple[tuple[bytes, str], ...] = (
    (b"GGUF", "a GGUF file (llama.cpp's format{version}): fmtsim checkpoint inspect, dequantize and explain "
              "read it (and convert --to mxfp4 for its MXFP4 tensors); this command reads safetensors "
              "checkpoints"),
    (b"PK\x03\x04", "a zip archive, as torch.save writes pytorch_model.bin / .pt files; fmtsim reads "
                     "safetensors (convert it with safetensors.torch.save_file)"),
    (b"\x93NUMPY", "a numpy .npy array: fmtsim compare reads it; fmtsim checkpoint reads safetensors"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (Keras .h5 weights), which fmtsim does not read"),
)


def _container(head: bytes) -> str | None:
    for magic, what in _CONTAINERS:
        if head.startswith(magic):
            version = f", version {int.from_bytes(head[4:8], 'little')}" if magic == b"GGUF" else ""
            return what.format(version=version)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "a Python pickle, as an old torch.save writes; fmtsim reads safetensors"
    return None


def _not_safetensors(p: Path, head: bytes, n: int, size: int) -> str:
    """Why the first 8 bytes cannot be a safetensors header length, for the error message."""
    known = _container(head)
    if known is not None:
        return f"{p}: not a safetensors file: it is {known}"
    text = head.decode("ascii", "replace")
    looks_text = all(32 <= b < 127 or b in (9, 10, 13) for b in head)
    what = f"it starts with the text {text!r}" if looks_text else f"it starts with the bytes {head.hex(' ')}"
    limit = f" (safetensors allows at most {MAX_HEADER_BYTES})" if n > MAX_HEADER_BYTES else ""
    return (f"{p}: not a safetensors file: its first 8 bytes give a header length of {n} bytes{limit}, "
            f"the file has {size}; {what}")


NO_CROSSCHECK = ("safetensors is not installed (pip install 'fmtsim[checkpoint]'): headers are checked by "
                 "fmtsim's own reader only, not cross-checked with the safetensors parser")


class CrosscheckSkipped(UserWarning):
    """The safetensors package is missing, so headers were not cross-checked with its parser."""


def crosscheck_available() -> bool:
    """Is the safetensors parser there to cross-check headers with?"""
    try:
        import safetensors  # noqa: F401
    except ImportError:
        return False
    return True


def crosscheck(h: Header) -> None:
    """The reference parser must accept the file and agree on names, dtypes and shapes. Without the
    safetensors package this warns (CrosscheckSkipped; the CLI prints it on every command) and
    relies on :func:`read_header`'s own validation."""
    try:
        from safetensors import safe_open
    except ImportError:
        warnings.warn(NO_CROSSCHECK, CrosscheckSkipped, stacklevel=2)
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


def chunks(fh: BinaryIO, h: Header, e: Entry, buf: np.ndarray) -> Iterator[np.ndarray]:
    """The tensor's bytes, in order, through a reused buffer (a multiple of the caller's unit)."""
    fh.seek(h.data_start + e.begin)
    left = e.nbytes
    while left:
        m = min(left, buf.size)
        view = buf[:m]
        got = fh.readinto(view.data)  # type: ignore[attr-defined]
        if got != m:
            raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
        yield view
        left -= m


def read_tensor(fh: BinaryIO, h: Header, e: Entry) -> np.ndarray:
    """The tensor's bytes as a fresh uint8 array."""
    fh.seek(h.data_start + e.begin)
    data = fh.read(e.nbytes)
    if len(data) != e.nbytes:
        raise CheckpointError(f"{h.path}: truncated data in tensor {e.name!r}")
    return np.frombuffer(data, dtype=np.uint8).copy()


def read_array(fh: BinaryIO, h: Header, e: Entry) -> np.ndarray:
    """The tensor with the numpy dtype of its tag, in its shape."""
    if e.dtype not in DTYPES:
        raise CheckpointError(f"{h.path}: tensor {e.name!r} has dtype {e.dtype} with no numpy type")
    return read_tensor(fh, h, e).view(DTYPES[e.dtype]).reshape(e.shape)


@dataclass
class Source:
    """What a checkpoint path resolved to."""

    path: Path  # the file, or the directory holding the shards
    shards: list[Path]
    index: dict[str, Any] | None
    is_dir: bool
    extra: list[Path] = field(default_factory=list)  # .safetensors files beside an index, not in it


def _hf_snapshot(path: Path) -> Path | None:
    """A Hugging Face cache entry (models--ORG--NAME) -> the snapshot refs/main names, or the only one."""
    snaps = path / "snapshots"
    if not snaps.is_dir():
        return None
    ref = path / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text().strip()
        if (snaps / rev).is_dir():
            return snaps / rev
    found = [p for p in snaps.iterdir() if p.is_dir()]
    if len(found) == 1:
        return found[0]
    raise CheckpointError(f"{path}: a Hugging Face cache entry with {len(found)} snapshots and no usable "
                          "refs/main; name the snapshot directory")


def _plain_name(name: str) -> bool:
    """A file name in the checkpoint's own folder: no directory part, no '..', not absolute."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name \
        and "\0" not in name and not Path(name).is_absolute() and Path(name).name == name


def _read_index(index_path: Path) -> tuple[dict[str, Any], list[str]]:
    """The index as JSON and the shard names it lists; CheckpointError names the file and the problem."""
    try:
        data = index_path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{index_path}: cannot read: {e.strerror}") from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in data[:64]:  # a byte-order mark, or NULs
        raise CheckpointError(f"{index_path}: the index is UTF-16 text; a checkpoint's JSON files are UTF-8 "
                              "(save it as UTF-8)")
    try:
        index = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{index_path}: the index is not UTF-8 text (byte 0x{data[e.start]:02x} at "
                              f"offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{index_path}: corrupt index: not valid JSON: {e}") from None
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise CheckpointError(f"{index_path}: corrupt index: no \"weight_map\" object mapping tensor names to "
                              "shard file names")
    weight_map = index["weight_map"]
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            raise CheckpointError(f"{index_path}: weight_map maps {name!r} to {shard!r} "
                                  f"({type(shard).__name__}), not to a shard file name")
        if not _plain_name(shard):
            raise CheckpointError(f"{index_path}: weight_map maps {name!r} to {shard!r}, which is not a plain "
                                  "file name in the checkpoint's folder; refused (a path outside it would be "
                                  "read but never written to the output)")
    if not weight_map:
        found = sorted(q.name for q in index_path.parent.glob("*.safetensors"))
        have = f"the folder holds {len(found)} .safetensors file(s): {', '.join(found[:5])}" if found else \
            "and the folder holds no .safetensors file"
        raise CheckpointError(f"{index_path}: weight_map is empty (it names no tensor); {have}")
    return index, sorted(set(weight_map.values()))


def find_source(path: str | Path) -> Source:
    """Resolve a checkpoint path; CheckpointError says what is wrong with it."""
    check_path(path, "find_source: path")
    if not str(path):
        raise CheckpointError("the input path is empty")
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: no such file or directory")
    if p.is_file():
        return Source(p, [p], None, False)
    if not p.is_dir():
        raise CheckpointError(f"{p}: not a regular file or a directory of safetensors shards")
    snap = _hf_snapshot(p)
    if snap is not None:
        p = snap
    index_path = p / INDEX_NAME
    if index_path.exists():
        index, names = _read_index(index_path)
        missing = [n for n in names if not (p / n).is_file()]
        if missing:
            raise CheckpointError(f"{index_path}: shard(s) listed but missing: {', '.join(missing)}")
        extra = sorted(q for q in p.glob("*.safetensors") if q.name not in set(names))
        return Source(p, [p / n for n in names], index, True, extra)
    files = sorted(p.glob("*.safetensors"))
    if len(files) != 1:
        found = f"{len(files)} .safetensors files" if files else "no .safetensors file"
        if not files:  # say what the weights are in, where they are in a container fmtsim knows of
            others, ggufs = [], []
            for q in sorted(p.iterdir())[:200]:
                if q.is_file() and q.suffix in (".gguf", ".bin", ".pt", ".pth", ".h5", ".pkl"):
                    try:
                        with open(q, "rb") as fh:
                            what = _container(fh.read(8))
                    except OSError:
                        what = None
                    if what is not None and what.startswith("a GGUF file"):
                        ggufs.append(q)
                    elif what is not None:
                        others.append(f"{q.name}: {what.split(',')[0].split(' (')[0]}")
            if ggufs:
                found += ("; it holds GGUF file(s) " + ", ".join(q.name for q in ggufs[:3]) +
                          (" ..." if len(ggufs) > 3 else "") + ": give one of them itself (fmtsim checkpoint "
                          f"inspect {ggufs[0]})")
            if others:
                found += "; it holds " + "; ".join(others[:3]) + (" ..." if len(others) > 3 else "") + \
                    ", which fmtsim does not read"
        raise CheckpointError(f"{p}: a directory needs {INDEX_NAME} or exactly one .safetensors file ({found})")
    return Source(p, files, None, True)


def read_headers(src: Source) -> tuple[dict[Path, Header], dict[str, Path]]:
    """Every shard's header, validated and cross-checked, and which shard holds each tensor; a name in
    two shards, or an index entry pointing at a shard that lacks it, is a CheckpointError."""
    headers = {s: read_header(s) for s in src.shards}
    for h in headers.values():
        crosscheck(h)
    where: dict[str, Path] = {}
    for s, h in headers.items():
        for name in h.entries:
            if name in where:
                raise CheckpointError(f"duplicated tensor name {name!r} in {where[name].name} and {s.name}")
            where[name] = s
    if src.index is not None:
        weight_map = src.index["weight_map"]
        for name, shard in weight_map.items():
            if where.get(name) != src.path / shard:
                raise CheckpointError(f"{INDEX_NAME}: {name!r} is listed in {shard} but that shard lacks it")
        unlisted = sorted(n for n in where if n not in weight_map)
        if unlisted:
            # loaders find tensors through the index: an unlisted one is invisible to them, and an output
            # index written from this one would drop it
            raise CheckpointError(f"{where[unlisted[0]]}: tensor {unlisted[0]!r} is not in {INDEX_NAME}'s "
                                  f"weight_map ({len(unlisted)} such tensor(s)); add it to the index or remove it "
                                  "from the shard")
    return headers, where


def load(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a file or sharded directory, with the ml_dtypes dtype of its tag
    (FNUZ included). Reads everything into memory: for inspection and tests."""
    check_path(path, "load: path")
    src = find_source(path)
    out: dict[str, np.ndarray] = {}
    for shard in src.shards:
        h = read_header(shard)
        with open(shard, "rb") as fh:
            for e in h.ordered():
                if e.name in out:
                    raise CheckpointError(f"{shard}: tensor {e.name!r} also appears in another shard")
                out[e.name] = read_array(fh, h, e)
    return out


def header_bytes(entries: list[Entry], tags: dict[str, str], metadata: dict[str, str]) -> bytes:
    """A safetensors header for ``entries`` (dtype tags overridden by ``tags``), 8-byte aligned."""
    obj: dict[str, Any] = {"__metadata__": metadata} if metadata else {}
    for e in entries:
        obj[e.name] = {"dtype": tags.get(e.name, e.dtype), "shape": list(e.shape),
                       "data_offsets": [e.begin, e.end]}
    raw = json.dumps(obj, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors aligns the data section to 8 bytes
    return struct.pack("<Q", len(raw)) + raw


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(directory: Path, names: set[str] | None = None) -> list[Path]:
    """Delete ``.NAME.tmp-PID`` files in ``directory`` whose process is gone (a killed run's leftovers)."""
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    for q in directory.iterdir():
        m = _TMP_RE.match(q.name)
        if m is None or (names is not None and m["name"] not in names) or not q.is_file():
            continue
        if not _pid_alive(int(m["pid"])):
            q.unlink(missing_ok=True)
            removed.append(q)
    return removed


def write_chunk(fh: BinaryIO, data: Any) -> None:
    """One write; a seam the disk-full tests replace."""
    fh.write(data)


def _os_message(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return e.strerror or str(e)


class ShardWriter:
    """``with ShardWriter(final) as w: w.write(bytes)`` -> fsynced and renamed on success; on any error
    the temporary file is removed, and OSErrors become a CheckpointError naming ``final``."""

    def __init__(self, final: Path) -> None:
        self.final = final
        self.tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        self.fh: BinaryIO | None = None
        self.committed = False

    def __enter__(self) -> ShardWriter:
        self._check_final()
        try:
            self.fh = open(self.tmp, "wb")
        except OSError as e:
            raise CheckpointError(f"{self.final}: cannot write: {_os_message(e)}") from None
        return self

    def write(self, data: Any) -> None:
        assert self.fh is not None
        try:
            write_chunk(self.fh, data)
        except OSError as e:
            raise CheckpointError(f"{self.final}: cannot write: {_os_message(e)}; "
                                  "nothing was left under that name") from None

    def finish(self) -> Path:
        """Flush and fsync; the caller may re-read ``self.tmp`` before :meth:`commit`."""
        assert self.fh is not None
        try:
            self.fh.flush()
            os.fsync(self.fh.fileno())
            self.fh.close()
        except OSError as e:
            raise CheckpointError(f"{self.final}: cannot write: {_os_message(e)}; "
                                  "nothing was left under that name") from None
        return self.tmp

    def _check_final(self) -> None:
        try:
            check_replaceable(self.final)
        except UnsafeOutputError as e:
            raise CheckpointError(str(e)) from None

    def commit(self) -> None:
        if self.fh is not None and not self.fh.closed:
            self.finish()
        self._check_final()
        try:
            os.replace(self.tmp, self.final)
        except OSError as e:
            raise CheckpointError(f"{self.final}: cannot rename into place: {_os_message(e)}") from None
        self.committed = True

    def __exit__(self, *exc: Any) -> None:
        if self.fh is not None and not self.fh.closed:
            self.fh.close()
        if not self.committed:
            self.tmp.unlink(missing_ok=True)


def check_output(src: Source, output: str | Path) -> Path:
    """Where a job writes: the output directory for a directory source, else the output file.

    A file source with an output that is an existing directory or ends in a path separator
    writes ``OUT/<source name>``. Refuses an output inside (or equal to) the input, an existing
    file where a directory is needed, and a location where a real test write fails (``os.access``
    says yes to root even on a read-only mount).
    """
    text = str(output)  # before Path() drops a trailing separator
    if not text:
        raise CheckpointError("the output path is empty (it would mean the current directory)")
    out = Path(output)
    if not src.is_dir and (out.is_dir() or text.endswith((os.sep, "/"))):
        out = out / src.path.name
    s, o = src.path.resolve(), out.resolve()
    if o == s or (src.is_dir and s in o.parents):
        raise CheckpointError(f"output {out} is inside the input {src.path}")
    if src.is_dir and out.exists() and not out.is_dir():
        raise CheckpointError(f"output {out} exists and is not a directory (the input is a directory)")
    if not src.is_dir and out.exists() and not out.is_file():
        raise CheckpointError(f"output {out} exists and is not a regular file")
    parent = out if src.is_dir else out.parent
    probe_dir = parent if parent.exists() else next((q for q in parent.parents if q.exists()), Path("/"))
    if not probe_dir.is_dir():
        raise CheckpointError(f"cannot create output directory {parent}: {probe_dir} is not a directory")
    probe = probe_dir / f".fmtsim-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(probe, "wb") as fh:
            fh.write(b"x")
    except OSError as e:
        raise CheckpointError(f"output directory {probe_dir} is not writable: {_os_message(e)}") from None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return out


def check_paths(src: str | Path, out: str | Path) -> None:
    """Refuse empty input and output paths before any work: Path("") is the current directory."""
    if not str(src):
        raise CheckpointError("the input path is empty")
    if not str(out):
        raise CheckpointError("the output path is empty (it would mean the current directory)")


def worker_count(jobs: Any, shards: int) -> int:
    """--jobs as a number of worker processes: at least 1, at most one per shard and per CPU."""
    try:
        jobs = argcheck.jobs(jobs, "--jobs")
    except (TypeError, ValueError) as e:
        raise CheckpointError(str(e)) from None
    return max(1, min(jobs, shards, os.cpu_count() or 1))


def run_shards(work: Callable[..., Any], job_list: list[Any], jobs: int, size: Callable[[Any], int],
               scheduler: Any = None, progress: tuple[int, str] | None = None) -> list[Any]:
    """work(job, update) for every shard job: in this process (progress per chunk), in up to
    ``jobs`` worker processes, or on the workers of a Dask cluster (``scheduler``: a
    dask.distributed.Client or an address; progress per finished shard, ``size(result)``
    bytes); results in order. A cluster's workers read the input and write the output
    shards at the same paths, so those must be on a file system they share. ``progress``:
    (total bytes, label) for a progress bar (tqdm, the checkpoint extra), or None."""
    n = worker_count(jobs, len(job_list))
    if scheduler is not None and jobs != 1:
        raise CheckpointError("give --jobs or --scheduler, not both (a Dask cluster has its own workers)")
    results = []
    try:
        ex = get_executor(None if scheduler is not None else n, scheduler)
    except (ImportError, OSError, TypeError, ValueError) as e:
        raise CheckpointError(f"--scheduler: {e}") from None
    bar = _progress_bar(*progress) if progress is not None else None
    update = bar.update if bar is not None else None
    try:
        with ex:
            if ex.in_process:
                for j in job_list:
                    # per chunk as the shard is worked; then the bytes no chunk counted (its
                    # header, tensors copied whole), so the bar ends at the checkpoint's size
                    seen = [0]

                    def counted(nbytes: int, seen: list[int] = seen) -> None:
                        seen[0] += nbytes
                        update(nbytes)  # type: ignore[misc]

                    r = work(j, counted if update else None)
                    if update and size(r) > seen[0]:
                        update(size(r) - seen[0])
                    results.append(r)
                return results
            for r in ex.imap(work, job_list):
                results.append(r)
                if update:
                    update(size(r))
    finally:
        if bar is not None:
            bar.close()
    return results


def _progress_bar(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a declared dependency of the checkpoint jobs
        return None
    return tqdm(total=total, unit="B", unit_scale=True, desc=desc)


def make_output_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CheckpointError(f"cannot create output directory {directory}: {_os_message(e)}") from None


def copy_side_files(src: Source, out: Path, skip: set[str], rewrite: dict[str, bytes]) -> list[str]:
    """Copy every file of a directory source except its shards (``skip``) into ``out``, subfolders
    included, each through a temporary name; ``rewrite`` maps a relative path to new contents.
    ``.safetensors`` files that are not shards (not in the index) are left out: they would be
    copied unconverted. Returns notes about what was left out."""
    notes: list[str] = []
    root = src.path
    for item in sorted(root.rglob("*")):
        rel = item.relative_to(root).as_posix()
        if rel in skip or item.is_dir() or _TMP_RE.match(item.name) or item.name.startswith(".fmtsim-probe"):
            continue
        if not item.is_file():
            notes.append(f"{rel}: not a regular file, left out")
            continue
        if item.suffix == ".safetensors":
            notes.append(f"{rel}: a .safetensors file not in {INDEX_NAME}: left out (convert it on its own)")
            continue
        target = out / rel
        make_output_dir(target.parent)
        with ShardWriter(target) as w:
            if rel in rewrite:
                w.write(rewrite[rel])
            else:
                try:
                    fh = open(item, "rb")
                except OSError as e:
                    raise CheckpointError(f"{item}: cannot read: {_os_message(e)}") from None
                with fh:
                    while piece := fh.read(1 << 20):
                        w.write(piece)
            w.commit()
    for rel, data in rewrite.items():
        if not (root / rel).exists():
            with ShardWriter(out / rel) as w:
                w.write(data)
                w.commit()
    return notes
