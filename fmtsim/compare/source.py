"""``fmtsim compare SOURCE``: every chosen tensor of a model folder, a safetensors file or a
.npy, under every scheme, tensor by tensor (one tensor in memory per worker, read straight from
its shard), through fmtsim.executor (this process, local processes or a Dask cluster); the same
digits whatever runs it. The overall row of a scheme is the metrics of all the chosen weights
together (:class:`fmtsim.compare.Totals`), so large tensors weigh by their size."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import Totals, _kurtosis, evaluate, parse_scheme

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


def _is_npy(p: Path) -> bool:
    return p.is_file() and p.suffix == ".npy"


def select_tensors(source: str | Path, patterns: Sequence[str] | None = None) -> list[tuple[str, Any, Any, str]]:
    """(name, entry, header, shard path) of every tensor of a safetensors file or model folder that
    ``patterns`` (fnmatch globs on the name) choose; by default every 2-D float tensor whose name
    ends in "weight". A chosen tensor that holds no float weights is refused, naming it."""
    from ..checkpoint.files import find_source, read_headers

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
            continue
        chosen.append((name, e, h, str(where[name])))
    if not chosen:
        what = f"matching {', '.join(patterns)}" if patterns else "that is a 2-D float weight"
        raise ValueError(f"{source}: no tensor {what} (of {len(where)} tensors)")
    return chosen


def _run_piece(piece: _Piece) -> TensorResult:
    if piece.entry is None:
        x = np.load(piece.path, mmap_mode="r", allow_pickle=False)
        dtype = str(x.dtype)
    else:
        from ..checkpoint.files import read_array

        with open(piece.path, "rb") as fh:
            x = read_array(fh, piece.header, piece.entry)
        dtype = piece.entry.dtype
    x64 = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x64).all():
        bad = int(np.argmax(~np.isfinite(x64).reshape(-1)))
        raise ValueError(f"{piece.path}: tensor {piece.name!r} holds a NaN or Inf (first at flat index {bad}): "
                         "its error under any scheme is undefined")
    totals, kq, skipped = {}, {}, {}
    for spec in piece.schemes:
        try:
            r = evaluate(x64, spec)
        except ValueError as e:  # the scheme does not fit this tensor's shape: said, not fatal
            skipped[spec] = str(e)
            continue
        totals[spec] = Totals.of(x64, r["w_hat"], r["bits_per_weight"], r["clipped_count"])
        kq[spec] = r["kurtosis_quantized"]
    return TensorResult(piece.name, tuple(x64.shape), dtype, _kurtosis(x64), totals, kq, skipped)


def compare_source(source: str | Path, schemes: Sequence[str], tensors: Sequence[str] | None = None,
                   jobs: int | None = None, scheduler: Any = None,
                   progress: Callable[[int, int, str], None] | None = None) -> Report:
    """Every chosen tensor of ``source`` (a .npy, a safetensors file or a model folder, sharded
    or not) under every scheme spec; ``progress(done, total, name)`` after each tensor."""
    from ..argcheck import path as check_path
    from ..executor import get_executor

    check_path(source, "compare: source")
    specs = tuple(schemes)
    if not specs:
        raise ValueError("compare: no schemes given")
    for spec in specs:
        parse_scheme(spec)  # every spec checked before any tensor is read
    p = Path(source)
    if _is_npy(p):
        if tensors:
            raise ValueError(f"{p}: a .npy holds one tensor; --tensors chooses among a checkpoint's")
        pieces = [_Piece(p.stem, str(p), None, None, specs)]
    else:
        pieces = [_Piece(name, shard, e, h, specs) for name, e, h, shard in select_tensors(p, tensors)]
    report = Report(str(source), specs)
    with get_executor(jobs, scheduler, pieces=len(pieces)) as ex:
        for i, tr in enumerate(ex.imap(_run_piece, pieces)):
            report.tensors.append(tr)
            if progress is not None:
                progress(i + 1, len(pieces), tr.name)
    return report


def iter_rows(report: Report) -> Iterator[dict[str, Any]]:
    """Every per-tensor row, then every overall row (tensor "(all)"), for CSV."""
    yield from report.per_tensor()
    for r in report.overall():
        yield {"tensor": "(all)", "shape": "", **r, "kurtosis": "", "kurtosis_quantized": ""}
