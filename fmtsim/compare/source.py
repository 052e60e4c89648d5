"""``fmtsim compare SOURCE``: every chosen tensor of a model folder, a safetensors file, a GGUF file
(its F32/F16/BF16 tensors, as llama-quantize reads them) or a .npy, under every scheme, tensor by
tensor (one tensor in memory per worker, read straight from its shard), through fmtsim.executor
(this process, local processes or a Dask cluster); the same digits whatever runs it. The overall row
of a scheme is the metrics of all the chosen weights together (:class:`fmtsim.compare.Totals`), so
large tensors weigh by their size."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import NotApplicable, Totals, _kurtosis, evaluate, parse_scheme

__all__ = ["TensorResult", "Report", "compare_source", "select_tensors"]

# the safetensors dtype tags whose tensors hold weights to compare (quantized codes do not)
FLOAT_TAGS = ("F64", "F32", "F16", "BF16")


@dataclass
class TensorResult:
    name: str
    shape: tuple[int, ...]
    dtype: str
    kurtosis: float
    totals: dict[str, Totals]  # scheme spec -> its sums over this tensor
    kurtosis_quantized: dict[str, float]  # scheme spec -> kurtosis of what its quantizer was given
    skipped: dict[str, str] = field(default_factory=dict)  # scheme spec -> why it does not apply here


@dataclass
class Report:
    source: str
    schemes: tuple[str, ...]
    tensors: list[TensorResult] = field(default_factory=list)
    pieces: dict[str, Any] = field(default_factory=dict, repr=False)  # name -> where to read it again
    notes: list[str] = field(default_factory=list)  # what the reader must know about the rows (printed)

    def load(self, name: str) -> np.ndarray:
        """A compared tensor's values again (float64), read from its file (for the figures)."""
        return _read(self.pieces[name])

    def not_applicable(self) -> dict[str, tuple[str, str]]:
        """Scheme spec -> (the first tensor it does not apply to, why), for the schemes left out
        of :meth:`overall` (their overall row would cover fewer weights than the others')."""
        out: dict[str, tuple[str, str]] = {}
        for tr in self.tensors:
            for spec, why in tr.skipped.items():
                out.setdefault(spec, (tr.name, why))
        return out

    def overall(self) -> list[dict[str, Any]]:
        """One row per scheme that applies to every tensor, over all of them, ranked by MSE
        (ties by scheme)."""
        rows = []
        gone = self.not_applicable()
        for spec in self.schemes:
            if spec in gone:
                continue
            t = Totals()
            for tr in self.tensors:
                t.add(tr.totals[spec])
            rows.append({"scheme": spec, "bits_per_weight": t.bits / t.n if t.n else 0.0, "weights": t.n,
                         **t.metrics()})
        return sorted(rows, key=lambda r: (r["mse"], r["scheme"]))

    def per_tensor(self) -> list[dict[str, Any]]:
        rows = []
        for tr in self.tensors:
            for spec in self.schemes:
                if spec not in tr.totals:
                    continue
                t = tr.totals[spec]
                rows.append({"tensor": tr.name, "shape": "x".join(map(str, tr.shape)), "scheme": spec,
                             "bits_per_weight": t.bits / t.n if t.n else 0.0, "weights": t.n, **t.metrics(),
                             "kurtosis": tr.kurtosis, "kurtosis_quantized": tr.kurtosis_quantized[spec]})
        return rows


@dataclass(frozen=True)
class _Piece:
    """One tensor to compare: where it is (a shard and its entry, or a .npy file)."""

    name: str
    path: str
    entry: Any  # checkpoint.files.Entry, or None for a .npy
    header: Any  # checkpoint.files.Header (its offsets), or None
    schemes: tuple[str, ...]
    activations: tuple[str, Any, Any] | None = None  # (path, entry, header) of this layer's inputs X
    stored: tuple[str, Any, Any, float, str] | None = None  # a checkpoint's own quantization of this
    # tensor, dequantized: (path, entry, header, bits per weight as stored, row label)


def _is_npy(p: Path) -> bool:
    return p.is_file() and p.suffix == ".npy"


def select_tensors(source: str | Path, patterns: Sequence[str] | None = None,
                   left_out: list[str] | None = None) -> list[tuple[str, Any, Any, str]]:
    """(name, entry, header, shard path) of every tensor of a safetensors file or model folder that
    ``patterns`` (fnmatch globs on the name) choose; by default every 2-D float tensor whose name
    ends in "weight". A chosen tensor that holds no float weights is refused, naming it."""
    from ..checkpoint.files import find_source, read_headers
    from ..checkpoint.gguf import is_gguf

    if is_gguf(source):
        return _select_gguf(Path(source), patterns, left_out)
    src = find_source(source)
    headers, where = read_headers(src)
    chosen = []
    for name in sorted(where):
        h = headers[where[name]]
        e = h.entries[name]
        if patterns:
            if not any(fnmatch.fnmatchcase(name, pat) for pat in patterns):
                continue
            if e.dtype not in FLOAT_TAGS:
                raise ValueError(f"{where[name]}: tensor {name!r} is {e.dtype}, not float weights "
                                 f"({'/'.join(FLOAT_TAGS)}): leave it out of --tensors")
        elif not (e.dtype in FLOAT_TAGS and len(e.shape) == 2 and name.endswith("weight")):
            if left_out is not None and len(e.shape) == 2 and name.endswith("weight"):
                left_out.append(f"{name} ({e.dtype})")  # a weight, but not float: said, not silently dropped
            continue
        chosen.append((name, e, h, str(where[name])))
    if not chosen:
        what = f"matching {', '.join(patterns)}" if patterns else "that is a 2-D float weight"
        raise ValueError(f"{source}: no tensor {what} (of {len(where)} tensors)")
    return chosen


GGUF_FLOAT = ("F32", "F16", "BF16", "F64")


def _select_gguf(p: Path, patterns: Sequence[str] | None, left_out: list[str] | None
                 ) -> list[tuple[str, Any, Any, str]]:
    """A GGUF file's float tensors (F32/F16/BF16, as llama-quantize reads them): by default every 2-D one
    whose name ends in "weight"; its quantized tensors are weights already rounded, left out and said."""
    from ..checkpoint.gguf import read_gguf

    g = read_gguf(p)
    chosen = []
    quantized: list[str] = []
    for t in g.tensors:
        if patterns:
            if not any(fnmatch.fnmatchcase(t.name, pat) for pat in patterns):
                continue
            if t.type.name not in GGUF_FLOAT:
                raise ValueError(f"{p}: tensor {t.name!r} is {t.type.name}, not float weights "
                                 f"({'/'.join(GGUF_FLOAT)}): leave it out of --tensors")
        elif not (t.type.name in GGUF_FLOAT and len(t.shape) == 2 and t.name.endswith("weight")):
            if len(t.shape) == 2 and t.name.endswith("weight"):
                quantized.append(f"{t.name} ({t.type.name})")
            continue
        chosen.append((t.name, t, "gguf", str(p)))
    if left_out is not None:
        left_out += quantized
    if not chosen:
        what = f"matching {', '.join(patterns)}" if patterns else "that is a 2-D float weight"
        also = (f"; its 2-D weights are quantized ({', '.join(quantized[:3])}{', ...' if len(quantized) > 3 else ''}):"
                " compare reads the F32/F16/BF16 GGUF llama-quantize starts from") if quantized else ""
        raise ValueError(f"{p}: no tensor {what} (of {len(g.tensors)} tensors){also}")
    return chosen


def _read(piece: _Piece, what: str = "weights") -> np.ndarray:
    if piece.header == "gguf":
        from ..checkpoint.gguf import iter_values

        with open(piece.path, "rb") as fh:
            x = np.concatenate(list(iter_values(fh, piece.entry))).reshape(piece.entry.shape)
        return np.asarray(x, dtype=np.float64)
    if piece.entry is None:
        try:
            x = np.load(piece.path, mmap_mode="r", allow_pickle=False)
        except ValueError as e:
            raise ValueError(f"{piece.path}: not a numeric .npy ({e})") from None
        if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
            raise ValueError(f"{piece.path}: holds {x.dtype}, not float {what}")
    else:
        if piece.entry.dtype not in FLOAT_TAGS:
            raise ValueError(f"{piece.path}: tensor {piece.name!r} is {piece.entry.dtype}, not float {what}")
        from ..checkpoint.files import read_array

        with open(piece.path, "rb") as fh:
            x = read_array(fh, piece.header, piece.entry)
    return np.asarray(x, dtype=np.float64)


def _activations_for(piece: _Piece, shape: tuple[int, ...]) -> np.ndarray | None:
    if piece.activations is None:
        return None
    path, entry, header = piece.activations
    a = _read(_Piece(entry.name if entry is not None else piece.name, path, entry, header, ()), "activations")
    if a.size == 0:
        raise ValueError(f"{path}: activations for {piece.name!r} have no rows (shape {a.shape})")
    if a.ndim != 2 or len(shape) != 2 or a.shape[1] != shape[1]:
        raise ValueError(f"{path}: activations for {piece.name!r} have shape {a.shape}; the weight {shape} needs "
                         f"(tokens, {shape[1] if len(shape) == 2 else '?'})")
    if not np.isfinite(a).all():
        raise ValueError(f"{path}: activations for {piece.name!r} hold a NaN or Inf")
    return a


def _run_piece(piece: _Piece) -> TensorResult:
    x64 = _read(piece)
    acts = _activations_for(piece, x64.shape)
    dtype = piece.entry.dtype if piece.entry is not None else str(np.load(piece.path, mmap_mode="r").dtype)
    if not np.isfinite(x64).all():
        bad = int(np.argmax(~np.isfinite(x64).reshape(-1)))
        raise ValueError(f"{piece.path}: tensor {piece.name!r} holds a NaN or Inf (first at flat index {bad}): "
                         "its error under any scheme is undefined")
    if x64.size == 0:
        raise ValueError(f"{piece.path}: tensor {piece.name!r} has no elements (shape {x64.shape}): there is no "
                         "error to measure; leave it out with --tensors")
    totals, kq, skipped = {}, {}, {}
    if piece.stored is not None:
        path, entry, header, bits, label = piece.stored
        w_hat = _read(_Piece(piece.name, path, entry, header, ()))
        if w_hat.shape != x64.shape:
            raise ValueError(f"{path}: the stored {piece.name!r} dequantizes to shape {w_hat.shape}; the original "
                             f"is {x64.shape}: is --original the model this checkpoint was made from?")
        totals[label] = Totals.of(x64, w_hat, bits, 0, acts)
        kq[label] = _kurtosis(x64)
    for spec in piece.schemes:
        try:
            r = evaluate(x64, spec)
        except NotApplicable as e:  # the scheme does not fit this tensor's shape: said, not fatal
            skipped[spec] = str(e)
            continue
        except ValueError as e:
            raise ValueError(f"{piece.path}: tensor {piece.name!r} {x64.shape}: {e}") from None
        totals[spec] = Totals.of(x64, r["w_hat"], r["bits_per_weight"], r["clipped_count"], acts)
        kq[spec] = r["kurtosis_quantized"]
    return TensorResult(piece.name, tuple(x64.shape), dtype, _kurtosis(x64), totals, kq, skipped)


def _activation_sources(path: str | Path, pieces: list[_Piece]) -> list[_Piece]:
    """Each piece with its activations: a .npy (tokens x k) for every weight of k input features,
    or a safetensors file whose tensors are named as the weights they feed."""
    from dataclasses import replace

    p = Path(path)
    if _is_npy(p):
        a = np.load(p, mmap_mode="r", allow_pickle=False)
        if a.ndim != 2 or a.shape[0] == 0:
            raise ValueError(f"{p}: activations must be 2-D (tokens, features) with at least one token, not shape "
                             f"{a.shape}")
        if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
            raise ValueError(f"{p}: holds {a.dtype}, not float activations")
        out = [replace(pc, activations=(str(p), None, None)) if len(_shape(pc)) == 2 and _shape(pc)[1] == a.shape[1]
               else pc for pc in pieces]
    else:
        from ..checkpoint.files import find_source, read_headers

        headers, where = read_headers(find_source(p))
        out = [replace(pc, activations=(str(where[pc.name]), headers[where[pc.name]].entries[pc.name],
                                        headers[where[pc.name]])) if pc.name in where else pc for pc in pieces]
    if not any(pc.activations for pc in out):
        raise ValueError(f"{p}: no activations fit any chosen weight (a .npy needs as many columns as a weight's "
                         "input features; a safetensors file, tensors named as the weights)")
    return out


def _shape(pc: _Piece) -> tuple[int, ...]:
    if pc.entry is not None:
        return tuple(pc.entry.shape)
    return tuple(np.load(pc.path, mmap_mode="r", allow_pickle=False).shape)


def compare_source(source: str | Path, schemes: Sequence[str], tensors: Sequence[str] | None = None,
                   jobs: int | None = None, scheduler: Any = None,
                   progress: Callable[[int, int, str], None] | None = None,
                   activations: str | Path | None = None, original: str | Path | None = None) -> Report:
    """Every chosen tensor of ``source`` (a .npy, a safetensors file or a model folder, sharded
    or not) under every scheme spec; ``progress(done, total, name)`` after each tensor. With
    ``activations`` (calibration inputs X: a .npy or a safetensors file), the output error of
    X W^T against X W_hat^T too, for the weights they fit. With ``original`` (the unquantized
    model), ``source`` is a quantized checkpoint fmtsim reads (fmtsim.checkpoint): its own
    quantization of each layer, dequantized exactly, is one more row ("stored: PRODUCER")
    against the schemes computed from the original weights."""
    from ..argcheck import path as check_path

    check_path(source, "compare: source")
    specs = tuple(schemes)
    if not specs:
        raise ValueError("compare: no schemes given")
    for spec in specs:
        parse_scheme(spec)  # every spec checked before any tensor is read
    p = Path(source)
    if original is not None:
        check_path(original, "compare: original")
        return _compare_stored(p, Path(original), specs, tensors, jobs, scheduler, progress, activations)
    from ..checkpoint.gguf import is_gguf

    if not _is_npy(p) and not is_gguf(p):
        quantized = _quantized_layers(p)
        if quantized:
            raise ValueError(f"{p}: holds quantized tensors ({quantized}); give --original MODEL (the weights it was "
                             "made from) to compare its own quantization with the alternatives")
    if _is_npy(p):
        if tensors:
            raise ValueError(f"{p}: a .npy holds one tensor; --tensors chooses among a checkpoint's")
        pieces = [_Piece(p.stem, str(p), None, None, specs)]
    else:
        left_out: list[str] = []
        pieces = [_Piece(name, shard, e, h, specs) for name, e, h, shard in select_tensors(p, tensors, left_out)]
    if activations is not None:
        check_path(activations, "compare: activations")
        pieces = _activation_sources(activations, pieces)
    report = Report(str(source), specs, pieces={pc.name: pc for pc in pieces})
    if not _is_npy(p) and left_out:
        report.notes.append(f"left out {len(left_out)} 2-D weight(s) that are not float: {', '.join(left_out[:3])}"
                            f"{', ...' if len(left_out) > 3 else ''} (choose with --tensors; a quantized checkpoint "
                            "is compared with --original)")
    return _run(report, pieces, jobs, scheduler, progress)


def _run(report: Report, pieces: list[_Piece], jobs: Any, scheduler: Any,
         progress: Callable[[int, int, str], None] | None) -> Report:
    from ..executor import get_executor

    with get_executor(jobs, scheduler, pieces=len(pieces)) as ex:
        for i, tr in enumerate(ex.imap(_run_piece, pieces)):
            report.tensors.append(tr)
            if progress is not None:
                progress(i + 1, len(pieces), tr.name)
    return report


def _quantized_layers(p: Path) -> str:
    """The producer and count of the quantized layers fmtsim finds in a checkpoint ("" if none)."""
    from ..checkpoint.dequant import _scan

    try:
        *_, det = _scan(p, None)
    except ValueError:
        return ""
    if not det.layers:
        return ""
    names = sorted({m.producer.name for m in det.layers.values()})
    return f"{len(det.layers)} layers, {', '.join(names)}"


def _compare_stored(source: Path, original: Path, specs: tuple[str, ...], tensors: Sequence[str] | None,
                    jobs: Any, scheduler: Any, progress: Callable[[int, int, str], None] | None,
                    activations: str | Path | None) -> Report:
    """A quantized checkpoint against the weights it was made from: each quantized layer's stored
    values (dequantized by fmtsim.checkpoint, float32: exact for every layout whose values fit
    it, else rounded once) as a row of its own, and every scheme computed from the original."""
    import tempfile

    from ..checkpoint.files import find_source, read_headers

    if _is_npy(source) or _is_npy(original):
        raise ValueError("--original compares a quantized checkpoint with its model: both are safetensors")
    chosen = {name: (e, h, shard) for name, e, h, shard in select_tensors(original, tensors)}
    src = find_source(source)
    s_headers, s_where = read_headers(src)
    tmp = tempfile.mkdtemp(prefix="fmtsim-compare-")
    try:
        return _stored_run(source, original, specs, chosen, s_headers, s_where, Path(tmp), jobs, scheduler, progress,
                           activations)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def _stored_run(source: Path, original: Path, specs: tuple[str, ...], chosen: dict[str, Any], s_headers: Any,
                s_where: Any, tmp: Path, jobs: Any, scheduler: Any,
                progress: Callable[[int, int, str], None] | None, activations: str | Path | None) -> Report:
    from ..checkpoint.dequant import dequantize
    from ..checkpoint.files import find_source, read_headers

    out = tmp / "dequantized"
    summary = dequantize(source, out, dtype="float32")
    d_headers, d_where = read_headers(find_source(out))
    pieces = []
    producers = sorted({tj.match.producer.name for tj in summary.jobs.values()})
    label = "stored: " + "+".join(producers)  # one row for the checkpoint, whatever mix of layouts it holds
    labels = {label}
    for tj in summary.jobs.values():
        if tj.out_name not in chosen:
            continue
        m = tj.match
        stored_bytes = sum(s_headers[s_where[n]].entries[n].nbytes for n in
                           (m.codes, m.scale, m.global_scale, m.zero_point) if n and n in s_where)
        numel = int(np.prod(tj.out_shape))
        e, h, shard = chosen[tj.out_name]
        dh = d_headers[d_where[tj.out_name]]
        pieces.append(_Piece(tj.out_name, shard, e, h, specs,
                             stored=(str(d_where[tj.out_name]), dh.entries[tj.out_name], dh, 8 * stored_bytes / numel,
                                     label)))
    if not pieces:
        raise ValueError(f"{source}: none of its quantized layers is among the chosen tensors of {original} (names "
                         "must match, as the checkpoint's producer wrote them)")
    if activations is not None:
        pieces = _activation_sources(activations, pieces)
    pieces.sort(key=lambda pc: pc.name)
    report = Report(f"{source} (against {original})", (*sorted(labels), *specs),
                    pieces={pc.name: pc for pc in pieces})
    report.notes += _other_tensors_differ(s_headers, s_where, original, {tj.out_name for tj in summary.jobs.values()},
                                          summary)
    return _run(report, pieces, jobs, scheduler, progress)


def _other_tensors_differ(s_headers: Any, s_where: Any, original: Path, quantized: set[str], summary: Any) -> list[str]:
    """A note when the checkpoint's unquantized float tensors (norms, embeddings) differ from the
    original's: then its quantized layers may hold weights of another domain (AWQ folds its
    per-channel scales into the norms before it quantizes), and their row measures that too."""
    from ..checkpoint.files import find_source, read_array, read_headers

    consumed = {n for tj in summary.jobs.values() for n in (tj.match.codes, tj.match.scale, tj.match.global_scale,
                                                             tj.match.zero_point, tj.match.pre_scale) if n}
    o_headers, o_where = read_headers(find_source(original))
    differ = []
    for name, shard in sorted(s_where.items()):
        if name in quantized or name in consumed or name not in o_where:
            continue
        e, oe = s_headers[shard].entries[name], o_headers[o_where[name]].entries[name]
        if e.dtype not in FLOAT_TAGS or oe.dtype not in FLOAT_TAGS or e.shape != oe.shape:
            continue
        with open(shard, "rb") as fh:
            a = np.asarray(read_array(fh, s_headers[shard], e), np.float64)
        with open(o_where[name], "rb") as fh:
            b = np.asarray(read_array(fh, o_headers[o_where[name]], oe), np.float64)
        if not np.array_equal(a, b):
            differ.append(name)
    if not differ:
        return []
    return [f"{len(differ)} unquantized tensor(s) of the checkpoint differ from --original ({', '.join(differ[:3])}"
            f"{', ...' if len(differ) > 3 else ''}): its layers may have been transformed before quantization (AWQ "
            "folds its scales into the norms), so the stored row measures that change as well as the quantization"]


def iter_rows(report: Report) -> Iterator[dict[str, Any]]:
    """Every per-tensor row, then every overall row (tensor "(all)"), for CSV."""
    yield from report.per_tensor()
    for r in report.overall():
        yield {"tensor": "(all)", "shape": "", **r, "kurtosis": "", "kurtosis_quantized": ""}
